"""The healing routes and the sweep end to end in the sandbox (the deployed template, IAM enforced on
every call): a fault injected while an operator paused repairs waits, shows in GET .../nodes, and is
repaired by the sweep the resume runs; the scheduled sweep runs within its role; the repair is listed
in the cluster's operations."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from autopilot_cli.client import AutopilotClient

from sandbox.core import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
OPERATION_TIMEOUT_S = 90.0
CLUSTER = "e2e-heal-api"


@pytest.fixture(scope="module")
def cluster(api: AutopilotClient, workshop_request: Callable[..., dict[str, Any]]) -> str:
    body = workshop_request(CLUSTER)
    body["clusterConfig"]["NodeRecovery"] = "None"
    created = api.wait_for_operation(
        api.create_cluster(body)["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )
    assert created["status"] == "SUCCEEDED", created.get("error")
    return CLUSTER


def listed_nodes(api: AutopilotClient) -> dict[str, dict[str, Any]]:
    return {n["InstanceId"]: n for n in api.list_nodes(CLUSTER)}


def until(found: Callable[[], Any], what: str, timeout: float = OPERATION_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout}s")


def test_a_fault_while_paused_waits_and_the_resume_repairs_it(
    sandbox: Sandbox, api: AutopilotClient, cluster: str
) -> None:
    worker = sorted(i for i, n in listed_nodes(api).items() if n["InstanceGroupName"] == "worker-group-1")[0]

    paused = api.set_healing(cluster, paused=True)
    sandbox.apply_fault(
        "node_unhealthy", {"cluster": cluster, "node_id": worker, "fault_type": "NvidiaErrorTerminate"}
    )
    held = until(
        lambda: (n := listed_nodes(api)[worker])["health"]["status"] == "Unhealthy" and n,
        "the Unhealthy report",
    )

    assert paused["paused"] is True
    assert paused["pausedBy"]
    assert "fault type NvidiaErrorTerminate" in held["health"]["reason"]
    assert held["repair"] is None  # paused: nothing started
    assert list(api.list_operations(cluster, kind="ReplaceNode")) == []

    resumed = api.set_healing(cluster, paused=False)
    [started] = until(lambda: list(api.list_operations(cluster, kind="ReplaceNode")), "the sweep's repair")
    repair = api.wait_for_operation(
        started["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )

    assert resumed["paused"] is False
    assert (repair["status"], repair["trigger"], repair["nodeId"]) == ("SUCCEEDED", "sweep", worker)
    assert repair["successorNodeId"] in listed_nodes(api)
    assert sandbox.metrics()["iam_denials"] == []  # the API's sweep within ApiFunction's role


def test_the_scheduled_sweep_runs_within_its_role_and_starts_nothing_twice(
    sandbox: Sandbox, api: AutopilotClient, cluster: str
) -> None:
    before = list(api.list_operations(cluster, kind="ReplaceNode"))
    [schedule] = [s for s in sandbox.stack.schedules if s.startswith("HealingSweepFunction")]

    sandbox.fire_schedule(schedule)
    sandbox.settle(10.0)

    runs = sandbox.metrics()["invocations"]["HealingSweepFunction"]
    assert runs["invocations"] >= 1  # this one, and those its schedule fired on the simulated clock
    assert runs["errors"] == 0
    assert list(api.list_operations(cluster, kind="ReplaceNode")) == before
    assert sandbox.metrics()["iam_denials"] == []
