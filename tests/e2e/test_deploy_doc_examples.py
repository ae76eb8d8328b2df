"""docs/deploy.md's examples of calling the API from other systems run as written against the sandbox's
SigV4-verifying API: the botocore snippet, and the curl --aws-sigv4 commands (when this curl has it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS
from sandbox.harness.core import Sandbox
from tests.e2e.conftest import ROOT

DEPLOY_DOC = (ROOT / "docs" / "deploy.md").read_text()
DOC_REGION = "us-east-1"


def _block(language: str, containing: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", DEPLOY_DOC, re.DOTALL)
    matching = [block for block in blocks if containing in block]
    assert len(matching) == 1, f"docs/deploy.md: one {language} block with {containing!r}"
    return matching[0].replace(f'"{DOC_REGION}"', "{region}").replace(f":{DOC_REGION}:", ":{region}:")


@pytest.fixture
def sandbox_credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SANDBOX_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    return dict(SANDBOX_CREDENTIALS)


@pytest.mark.usefixtures("sandbox_credentials")
def test_botocore_snippet_calls_the_api(sandbox: Sandbox, api_url: str) -> None:
    source = _block("python", "SigV4Auth").replace("{region}", repr(sandbox.region))
    # the snippet ends with its example call; run its definitions, then call with the doc's arguments
    definitions, example = source.rsplit("\nprint(", 1)
    namespace: dict[str, Any] = {"api_url": api_url}
    exec(definitions, namespace)

    assert 'call("GET", f"{api_url}/clusters"' in example
    listed = namespace["call"]("GET", f"{api_url}/clusters", sandbox.region)
    checked = namespace["call"](
        "POST", f"{api_url}/validate", sandbox.region, {"clusterConfig": {}, "provisioningParameters": {}}
    )

    assert listed == {"clusters": [], "nextToken": None}
    assert checked["valid"] is False
    assert any(error["path"] == "ClusterName" for error in checked["errors"])


def _curl_has_sigv4() -> bool:
    curl = shutil.which("curl")
    if curl is None:
        return False
    return (
        "--aws-sigv4"
        in subprocess.run([curl, "--help", "all"], check=False, capture_output=True, text=True).stdout
    )


@pytest.mark.skipif(not _curl_has_sigv4(), reason="this curl has no --aws-sigv4 (7.75 or later)")
@pytest.mark.parametrize("temporary", [True, False], ids=["session-credentials", "iam-user-keys"])
def test_curl_commands_call_the_api(
    sandbox: Sandbox,
    api_url: str,
    sandbox_credentials: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    temporary: bool,
) -> None:
    if not temporary:  # IAM user keys: no session token anywhere in the environment
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        sandbox_credentials = {k: v for k, v in sandbox_credentials.items() if k != "AWS_SESSION_TOKEN"}
    script = _block("bash", "curl --aws-sigv4").replace("{region}", sandbox.region)
    # API_URL comes from the stack's outputs on AWS; here from the sandbox
    script, replaced = re.subn(r"API_URL=\$\(aws cloudformation.*?\)\n", "", script, flags=re.DOTALL)
    assert replaced == 1
    (tmp_path / "validate-request.json").write_text(
        json.dumps({"clusterConfig": {}, "provisioningParameters": {}})
    )
    commands = [
        command for command in re.split(r"\n(?=curl )", script.strip()) if command.startswith("curl ")
    ]
    assert len(commands) == 2
    answers = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command.replace("curl ", "curl --silent --show-error --fail-with-body ", 1)],
            check=False,
            cwd=tmp_path,
            env={**os.environ, **sandbox_credentials, "API_URL": api_url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        answers.append(json.loads(done.stdout))

    assert answers[0] == {"clusters": [], "nextToken": None}
    assert answers[1]["valid"] is False
