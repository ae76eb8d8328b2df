"""schemathesis over docs/openapi.json against the sandbox's API: no 5xx, every answer as documented.

The run goes through the local API server (API Gateway's proxy event, SigV4 verification, the
ApiFunction in the Lambda runtime, moto and the simulators behind it), not a shortcut into the
handler, so what it finds is what a client of the deployed API would meet. It is seeded and
bounded: every phase (examples, coverage, fuzzing, stateful), one worker, a fixed number of
examples per operation and a time cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS
from sandbox.harness.core import Sandbox

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261122
MAX_EXAMPLES = 80  # per operation and phase; with the coverage and stateful cases: ~2,300 cases
MIN_CASES = 2000
# One request's wait: the first POST /clusters is ApiFunction's cold start plus the validation
# engine's import, seconds on a busy machine (schemathesis' default is 10 s).
REQUEST_TIMEOUT_S = 60
# A cap far above the run's usual time (about 9 minutes on a busy 2-core machine), so a hang fails
# instead of stalling CI. Not schemathesis' --max-time: with it, fuzzing and stateful repeat until time is up.
MAX_SECONDS = 900
PHASES = ("examples", "coverage", "fuzzing", "stateful")
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)


def test_fuzzing_the_api_finds_no_5xx_and_no_undocumented_answer(
    sandbox: Sandbox, api_url: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.json"
    command = [
        *(str(Path(sys.executable).parent / "st"), "run", str(ROOT / "docs" / "openapi.json")),
        *("--url", api_url, "--seed", str(SEED), "--workers", "1", "--no-shrink"),
        *("--request-timeout", str(REQUEST_TIMEOUT_S)),
        *("--max-examples", str(MAX_EXAMPLES), "--phases", ",".join(PHASES), "--checks", ",".join(CHECKS)),
        *("--generation-database", "none", "--no-color"),
        *("--report", "json", "--report-json-path", str(report)),
    ]
    environment = {
        **os.environ,
        **SANDBOX_CREDENTIALS,
        "AWS_REGION": sandbox.region,
        "SCHEMATHESIS_HOOKS": "tests.e2e.schemathesis_sigv4",
        "PYTHONPATH": str(ROOT),
    }

    run = subprocess.run(
        command,
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MAX_SECONDS,
        check=False,
    )

    summary = run.stdout[-20_000:]
    assert run.returncode == 0, summary
    result = json.loads(report.read_text())
    assert result["stop_reason"] == "completed", summary
    assert {name: phase["status"] for name, phase in result["phases"].items()} == dict.fromkeys(
        PHASES, "success"
    ), summary
    assert result["test_cases"]["generated"] >= MIN_CASES, summary
