"""The healing routes and the sweep end to end in the sandbox (the deployed template, IAM enforced on
every call): a fault injected while an operator paused repairs waits, shows in GET .../nodes, and is
repaired by the sweep HealingSweepFunction runs on the resume's Healing Resumed event; the scheduled
sweep runs within its role; the repair is listed in the cluster's operations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from autopilot_cli.client import AutopilotClient

from sandbox.harness.core import Sandbox

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


@pytest.fixture
def no_scheduled_sweep(sandbox: Sandbox) -> Iterator[None]:
    """The sweep's schedule rule disabled (the sandbox fires no disabled rule): only an event sweeps."""
    [schedule] = [s for lid, s in sandbox.stack.schedules.items() if lid.startswith("HealingSweepFunction")]
    events = sandbox.client("events")
    events.disable_rule(Name=schedule.rule_name)
    try:
        yield
    finally:
        events.enable_rule(Name=schedule.rule_name)


def sweeps(sandbox: Sandbox) -> tuple[int, int, int]:
    """HealingSweepFunction's invocations, its schedule's firings, its errors."""
    metrics = sandbox.metrics()
    function = metrics["invocations"].get("HealingSweepFunction", {})
    fired = sum(n for lid, n in metrics["scheduled_events"].items() if lid.startswith("HealingSweepFunction"))
    return function.get("invocations", 0), fired, function.get("errors", 0)


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
    sandbox: Sandbox, api: AutopilotClient, cluster: str, no_scheduled_sweep: None
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

    assert sandbox.settle(60.0)  # no sweep its schedule fired before it was disabled is left to run
    before = sweeps(sandbox)
    resumed = api.set_healing(cluster, paused=False)
    [started] = until(lambda: list(api.list_operations(cluster, kind="ReplaceNode")), "the sweep's repair")
    repair = api.wait_for_operation(
        started["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )

    assert resumed["paused"] is False
    assert (repair["status"], repair["trigger"], repair["nodeId"]) == ("SUCCEEDED", "sweep", worker)
    assert repair["successorNodeId"] in listed_nodes(api)
    # one sweep since the resume, the event's (EventBridge -> HealingSweepFunction), within its role
    assert sandbox.settle(60.0)
    assert sweeps(sandbox) == (before[0] + 1, before[1], 0)
    assert sandbox.metrics()["iam_denials"] == []


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
