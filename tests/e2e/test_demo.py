"""`make demo` in-process: every scenario passes in a real sandbox; the report has its shape."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from sandbox.apps.demo.runner import DemoOptions, run_demo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]
SCENARIOS = [
    "validate_rejects_bad_config",
    "create_cluster",
    "create_fails_for_capacity",
    "create_fails_lifecycle_script",
    "node_failure_replace",
    "duplicate_events_ignored",
    "healing_breaker_trips",
    "slurm_job_survives_repair",
    "session_limits",
    "cost_tags_drift_repaired",
    "budget_alert",
    "department_chargeback",
    "cleanup_leaves_nothing",
]


def test_demo_runs_every_scenario_and_writes_the_report(tmp_path: Path) -> None:
    report_path = tmp_path / "demo-report.json"
    out = io.StringIO()

    code = run_demo(DemoOptions(report_path=report_path), out=out)  # all of them, as `make demo`

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
    assert {"scenarios", "aws_calls", "state_transitions", "lambda_invocations"} <= set(report)
    # each capability did its part: lifecycle, healing, sessions, tags, budgets
    assert {
        "sagemaker:CreateCluster",
        "sagemaker:DeleteCluster",
        "budgets:CreateBudget",
        "sagemaker:BatchReplaceClusterNodes",
        "ssm:TerminateSession",
        "sagemaker:AddTags",
    } <= set(report["aws_calls"])
    assert {
        "ClusterEventsFunction",
        "SessionGuardFunction",
        "CostTaggerFunction",
        "BudgetAlertsFunction",
    } <= set(report["lambda_invocations_by_function"])
    assert all(isinstance(n, int) and n > 0 for n in report["aws_calls"].values())
    # the demo's own doings (session_limits' IAM users, create_cluster's look at the budget's
    # subscribers) are not the control plane's calls
    assert not {"iam:CreateUser", "budgets:DescribeSubscribersForNotification"} & set(report["aws_calls"])
    # three creates, two cleanups and four repairs at least
    assert report["state_transitions"] >= 9 * 10
    assert report["lambda_invocations"] >= len(SCENARIOS)
    # the timeline a person follows: every workflow step with its execution and duration, then a summary
    assert re.search(
        r"\d+\.\d\ds  create_cluster +STEP  Wait For Cluster  \[CreateClusterStateMachine op-", printed
    )
    assert re.search(r"CleanupClusterStateMachine op-[^\]]+\]  \(\d+\.\d\d s\)", printed)
    assert re.search(r"ReplaceNodeStateMachine op-[^\]]+\]  \(\d+\.\d\d s\)", printed)
    assert f"{len(SCENARIOS)}/{len(SCENARIOS)} scenarios passed" in printed
