"""Chargeback end to end (issue 25, "Done when"): the demo's ``department_chargeback`` alone in a real
sandbox, with real Slurm and the real agent reading Slurm's job completion log — jobs under two Slurm
accounts give per-account and per-user usage whose lines (with the unused capacity) add up to the
cluster's month-to-date spend within 1 %, the account crossing 80 % of its budget gets one alert per
threshold, and the login node replaced through healing is registered behind its load balancer in its
predecessor's place. The scenario's own checks are the assertions; these read its report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sandbox.apps.demo.runner import DemoOptions, run_demo
from sandbox.services.pricing.list_prices import price_per_hour
from tests.sandbox.conftest import slurm_required  # noqa: F401 - fixture

pytestmark = [
    pytest.mark.slow,  # a whole Sandbox on a running clock, real Slurm daemons and the agent process
    pytest.mark.usefixtures("slurm_required"),
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]


def test_department_usage_adds_up_alerts_once_and_the_login_node_stays_behind_its_balancer(
    tmp_path: Path,
) -> None:
    report_path = tmp_path / "demo-report.json"
    out = io.StringIO()

    code = run_demo(DemoOptions(scenarios=("department_chargeback",), report_path=report_path), out=out)

    report = json.loads(report_path.read_text())
    [entry] = report["scenarios"]
    assert code == 0, f"{entry['details'].get('failure')}\n{out.getvalue()}"
    details = entry["details"]
    usage = details["usage"]
    assert set(usage) == {"physics", "biology", "(unused capacity)"}
    assert usage["physics"] > usage["biology"] > 0
    assert sum(usage.values()) == pytest.approx(details["clusterSpendUsd"], rel=0.01)
    # the sum above holds whatever the accounts' lines are (the unused line is the rest): each line is
    # checked against Slurm's own elapsed time x the list price x the GPU share, computed here
    expected: dict[str, float] = {}
    for job in details["slurmJobs"]:
        share = min(job["gpusPerNode"] / job["nodeGpus"], 1) * job["nodes"]
        usd = job["seconds"] / 3600 * float(price_per_hour(job["instanceType"])) * share
        expected[job["account"]] = expected.get(job["account"], 0.0) + usd
    assert set(expected) == {"physics", "biology"}
    for account, usd in expected.items():
        assert usage[account] == pytest.approx(usd, abs=0.01 + 0.01 * usd), account
    assert details["alerts"] == [50, 80, 100]
    login = details["login"]
    assert login["successor"]
    assert login["successor"] != login["replaced"]
    assert len(login["targets"]) == 1
    assert "AgentFunction" in report["lambda_invocations_by_function"]
