"""PUT /clusters/{name}/instance-groups/{group} end to end in the sandbox: the API (IAM enforced on its
UpdateCluster and the group's execution role it passes) scales a worker group HyperPod then grows, and
refuses a scale-up while the cluster's growth is blocked."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot_cli.client import ApiError, AutopilotClient

from sandbox.harness.core import Sandbox
from tests.e2e.waiting import wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
OPERATION_TIMEOUT_S = 90.0


def worker_nodes(sandbox: Sandbox, name: str) -> int | None:
    """The worker group's running nodes once HyperPod is InService again, else None."""
    sagemaker = sandbox.client("sagemaker")
    if sagemaker.describe_cluster(ClusterName=name)["ClusterStatus"] != "InService":
        return None
    nodes = sagemaker.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
    return sum(1 for n in nodes if n["InstanceGroupName"] == "worker-group-1")


def test_scale_up_then_a_growth_block_refuses_the_next_but_not_a_scale_down(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    accepted = api.create_cluster(workshop_request("e2e-grow"))
    created = api.wait_for_operation(
        accepted["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )
    assert created["status"] == "SUCCEEDED", created.get("error")
    before = wait_for(lambda: worker_nodes(sandbox, "e2e-grow"), what="InService", advance=sandbox)

    scaled = api.scale_instance_group("e2e-grow", "worker-group-1", instance_count=before + 1)

    assert scaled["previousCount"] == before
    wait_for(
        lambda: True if worker_nodes(sandbox, "e2e-grow") == before + 1 else None,
        what="the scaled-up group",
        advance=sandbox,
    )
    assert scaled["operationId"] in [h["operationId"] for h in api.get_cluster("e2e-grow")["history"]]

    # What BudgetAlertsFunction's block-growth writes at 100 % ACTUAL (tests/e2e/test_budget_alerts.py
    # drives that path); here only the API's answer to it is under test.
    BudgetAlertTable(sandbox.stack.physical_id("StateTable"), sandbox.client("dynamodb")).block_growth(
        "e2e-grow",
        until=datetime(2099, 1, 1, tzinfo=UTC),
        at=datetime(2026, 11, 22, tzinfo=UTC),
        by="budget:test",
    )
    with pytest.raises(ApiError) as refused:
        api.scale_instance_group("e2e-grow", "worker-group-1", instance_count=before + 2)
    assert refused.value.status == 409
    assert "2099-01-01T00:00:00.000Z" in refused.value.message

    shrunk = api.scale_instance_group("e2e-grow", "worker-group-1", instance_count=before)
    assert shrunk["targetCounts"]["worker-group-1"] == before
