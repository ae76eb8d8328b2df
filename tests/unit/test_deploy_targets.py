"""`make deploy` asks nothing once samconfig.toml has the answers (CI, a second deploy); `make
deploy-guided` is the first, interactive one (docs/deploy.md)."""

from __future__ import annotations

import shlex
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sam_deploy_command(target: str) -> list[str]:
    """The `sam deploy` command `make -n <target>` would run, as words."""
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.replace("\\\n", " ")
    line = next(line for line in printed.splitlines() if "sam deploy" in line)
    return shlex.split(line)


def test_make_deploy_runs_sam_deploy_without_a_prompt() -> None:
    words = sam_deploy_command("deploy")
    assert not {"--guided", "-g"} & set(words)
    # samconfig.toml's confirm_changeset = true would stop at "Deploy this changeset? [y/N]"
    assert "--no-confirm-changeset" in words
    # a second deploy with nothing to change exits 0 instead of failing on an empty change set
    assert "--no-fail-on-empty-changeset" in words


def test_make_deploy_guided_asks() -> None:
    assert "--guided" in sam_deploy_command("deploy-guided")


def test_samconfig_answers_what_a_deploy_without_prompts_needs() -> None:
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    assert config["default"]["global"]["parameters"]["stack_name"]
    deploy = config["default"]["deploy"]["parameters"]
    assert set(deploy["capabilities"].split()) >= {"CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"}
    assert deploy["resolve_s3"] is True
