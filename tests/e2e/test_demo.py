"""`make demo` in-process: the four lifecycle scenarios pass in a real sandbox; the report has its shape."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from sandbox.demo.runner import DemoOptions, run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]
SCENARIOS = [
    "validate_rejects_bad_config",
    "create_cluster",
    "create_fails_for_capacity",
    "cleanup_leaves_nothing",
]


def test_demo_runs_every_lifecycle_scenario_and_writes_the_report(tmp_path: Path) -> None:
    report_path = tmp_path / "demo-report.json"
    out = io.StringIO()

    code = run_demo(DemoOptions(scenarios=tuple(SCENARIOS), report_path=report_path), out=out)

    printed = out.getvalue()
    report = json.loads(report_path.read_text())
    failures = {s["name"]: s["details"].get("failure") for s in report["scenarios"] if not s["passed"]}
    assert code == 0, f"{failures}\n{printed}"
    assert [s["name"] for s in report["scenarios"]] == SCENARIOS
    for entry in report["scenarios"]:
        assert set(entry) == {"name", "passed", "duration_s", "details"}
        assert entry["passed"] is True
        assert entry["duration_s"] > 0
        assert entry["details"]["checks"], entry["name"]
    assert {"sagemaker:CreateCluster", "sagemaker:DeleteCluster", "budgets:CreateBudget"} <= set(
        report["aws_calls"]
    )
    assert all(isinstance(n, int) and n > 0 for n in report["aws_calls"].values())
    assert (
        "sagemaker:ListTags" not in report["aws_calls"]
    )  # the demo's own checks are not the control plane's
    # create_cluster + capacity failure + cleanup (own create or create_cluster's) run >= 3 workflows
    assert report["state_transitions"] >= 3 * 10
    assert report["lambda_invocations"] >= len(SCENARIOS)
    assert report["wall_time_s"] < 60
    # the timeline a person follows: every workflow step with its execution and duration, then a summary
    assert re.search(
        r"\d+\.\d\ds  create_cluster +STEP  Wait For Cluster  \[CreateClusterStateMachine op-", printed
    )
    assert re.search(r"CleanupClusterStateMachine op-[^\]]+\]  \(\d+\.\d\d s\)", printed)
    assert "4/4 scenarios passed" in printed
