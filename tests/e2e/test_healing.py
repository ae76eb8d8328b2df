"""Self-healing end to end in the sandbox, driven only by injected faults and the public API.

The deployed template's ClusterEventsFunction, ReplaceNodeStateMachine and HealingSweepFunction do
the rest; every HyperPod event is delivered twice (``duplicate_events=1.0``). What the tests observe
is what an operator would: GET /clusters/{name}/operations?kind=ReplaceNode, GET .../healing, the
alerts topic, SageMaker's nodes, and the sandbox's log of the AWS calls the control plane made.

- a NodeRecovery None cluster (``CLUSTER``): an unhealthy worker is replaced with no API call, one
  operation and one Batch* call despite the duplicates; a controller is alerted, never touched; a
  reboot that does not heal escalates to a replace; a correlated storm trips the breaker, and the
  repairs left run after a resume, one at a time (``MaxConcurrentRepairs`` 1);
- a NodeRecovery Automatic cluster (``AUTOMATIC``): HyperPod repairs, Autopilot records and does not act.

Simulated deadlines are far from the simulated durations (a starved process lags while the sandbox
clock runs on): replaces and HyperPod's repair get 6 hours (36 s of wall time at x600: a repair
claimed just before the breaker trips waits that long for its slot), and the sweep runs once a day,
so only the event path (and the resume's own sweep) starts repairs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from autopilot_cli.client import AutopilotClient

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.harness.core import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
DEADLINE_S = 120.0
CLUSTER = "e2e-heal"
AUTOMATIC = "e2e-heal-auto"
WORKERS = "worker-group-1"
CONTROLLER = "controller-machine"
BREAKER_WINDOW_MINUTES = 10
PARAMETERS = {
    **DEMO_PARAMETERS,
    "MaxConcurrentRepairs": 1,
    "MaxUnhealthyPercent": 20,
    "BreakerWindowMinutes": BREAKER_WINDOW_MINUTES,
    "RebootDeadlineMinutes": 15,
    "ReplaceDeadlineMinutes": 360,
    "HyperPodRepairDeadlineMinutes": 360,
    "HealingSweepScheduleExpression": "rate(1 day)",
}
BATCH_CALLS = ("BatchRebootClusterNodes", "BatchReplaceClusterNodes")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=PARAMETERS, speed=600.0, duplicate_events=1.0) as running:
        assert running.hyperpod is not None
        # On AWS an event reaches its handler in seconds and HyperPod starts its own repair about a
        # minute later; at x600 that minute is 0.1 s of wall time, less than a busy machine takes to
        # deliver the event. Keep AWS's order: 20 simulated minutes (2 s of wall time).
        running.hyperpod.timings = dataclasses.replace(running.hyperpod.timings, auto_recovery_delay=20 * 60)
        yield running


def wait_for[T](check: Callable[[], T | None], *, what: str, deadline_s: float = DEADLINE_S) -> T:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {deadline_s} s")


def ended(api: AutopilotClient, operation_id: str) -> dict[str, Any] | None:
    operation = api.get_operation(operation_id)
    return operation if operation["status"] != "RUNNING" else None


@pytest.fixture(scope="module")
def clusters(api: AutopilotClient, workshop_request: Callable[..., dict[str, Any]]) -> tuple[str, str]:
    accepted = []
    for name, recovery in [(CLUSTER, "None"), (AUTOMATIC, "Automatic")]:
        body = workshop_request(name)
        body["clusterConfig"]["NodeRecovery"] = recovery
        accepted.append(api.create_cluster(body)["operationId"])
    for operation_id in accepted:
        created = wait_for(functools.partial(ended, api, operation_id), what="finished create")
        assert created["status"] == "SUCCEEDED", created.get("error")
    return CLUSTER, AUTOMATIC


@pytest.fixture(scope="module")
def alerts(sandbox: Sandbox) -> Callable[[], list[str]]:
    """What an operator's subscription to the alerts topic received since the last call."""
    sqs, sns = sandbox.client("sqs"), sandbox.client("sns")
    url = sqs.create_queue(QueueName="e2e-heal-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=sandbox.stack.outputs["AlertsTopicArn"],
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )

    def drain() -> list[str]:
        bodies: list[str] = []
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            bodies += [m["Body"] for m in messages]
            for m in messages:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return bodies

    return drain


class Faults:
    """Injects HyperPod faults, each after the breaker's window of the previous one has passed (one
    fault alone is not a storm), unless ``storm``."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.last: Any = None

    def unhealthy(self, cluster: str, node_id: str, fault_type: str, *, storm: bool = False) -> None:
        window = timedelta(minutes=BREAKER_WINDOW_MINUTES + 1)
        if self.last is not None and not storm:
            wait_for(lambda: self.sandbox.clock.now() > self.last + window or None, what="a quiet window")
        self.last = self.sandbox.clock.now()
        self.sandbox.apply_fault(
            "node_unhealthy", {"cluster": cluster, "node_id": node_id, "fault_type": fault_type}
        )


@pytest.fixture(scope="module")
def faults(sandbox: Sandbox) -> Faults:
    return Faults(sandbox)


def events_handled(sandbox: Sandbox) -> None:
    """Until the cluster-events queue is empty: every copy of every event reached the function (the
    sandbox never idles as a whole: schedules keep firing on its running clock)."""
    sqs = sandbox.client("sqs")
    url = sandbox.stack.physical_id("ClusterEventsQueue")
    names: list[Any] = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]

    def empty() -> bool | None:
        counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return True if all(counts[n] == "0" for n in names) else None

    wait_for(empty, what="an empty cluster-events queue")


def nodes(sandbox: Sandbox, cluster: str, group: str) -> dict[str, str]:
    """Instance id → InstanceStatus of the group's nodes, as SageMaker lists them."""
    listed = sandbox.client("sagemaker").list_cluster_nodes(ClusterName=cluster, MaxResults=100)
    return {
        n["InstanceId"]: n["InstanceStatus"]["Status"]
        for n in listed["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == group
    }


def running_workers(sandbox: Sandbox, cluster: str) -> list[str]:
    return sorted(n for n, status in nodes(sandbox, cluster, WORKERS).items() if status == "Running")


def batch_calls(sandbox: Sandbox) -> dict[str, int]:
    """Batch*ClusterNodes calls the control plane made so far (the sandbox's AWS call log)."""
    calls = sandbox.metrics()["aws_calls"]
    return {name: int(calls.get(f"sagemaker:{name}", 0)) for name in BATCH_CALLS}


def calls_since(sandbox: Sandbox, before: dict[str, int]) -> dict[str, int]:
    return {name: count - before[name] for name, count in batch_calls(sandbox).items()}


def repairs(api: AutopilotClient, cluster: str, node_id: str) -> list[dict[str, Any]]:
    """The node's ReplaceNode operations, as GET /clusters/{name}/operations?kind=ReplaceNode lists them."""
    return [o for o in api.list_operations(cluster, kind="ReplaceNode") if o.get("nodeId") == node_id]


def finished_repair(api: AutopilotClient, cluster: str, node_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        found = [o for o in repairs(api, cluster, node_id) if o["status"] != "RUNNING"]
        return found[0] if found else None

    return wait_for(ended, what=f"finished repair of {node_id}")


def actions(operation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["action"], a["result"]) for a in operation["actions"]]


def test_an_unhealthy_worker_is_replaced_through_a_recorded_operation_without_an_api_call(
    sandbox: Sandbox, api: AutopilotClient, clusters: tuple[str, str], faults: Faults
) -> None:
    worker = running_workers(sandbox, CLUSTER)[0]
    before = batch_calls(sandbox)

    faults.unhealthy(CLUSTER, worker, "NvidiaErrorTerminate")
    repair = finished_repair(api, CLUSTER, worker)

    assert repair["status"] == "SUCCEEDED", repair.get("error")
    assert (repair["kind"], repair["trigger"], repair["actor"]) == ("ReplaceNode", "event", "autopilot")
    assert repair["fault"]["faultType"] == "NvidiaErrorTerminate"
    assert "NvidiaErrorTerminate" in repair["fault"]["reason"]
    assert actions(repair) == [("replace", "succeeded")]
    successor = repair["successorNodeId"]
    assert successor
    assert successor != worker
    assert nodes(sandbox, CLUSTER, WORKERS)[successor] == "Running"
    assert worker not in running_workers(sandbox, CLUSTER)
    assert len(running_workers(sandbox, CLUSTER)) == 4
    assert calls_since(sandbox, before) == {"BatchRebootClusterNodes": 0, "BatchReplaceClusterNodes": 1}
    assert sandbox.metrics()["iam_denials"] == []  # every call within its role's permissions


def test_duplicated_events_cause_no_extra_action(
    sandbox: Sandbox, api: AutopilotClient, clusters: tuple[str, str], faults: Faults
) -> None:
    worker = running_workers(sandbox, CLUSTER)[0]
    handled = sandbox.metrics()["invocations"]["ClusterEventsFunction"]["invocations"]
    before = batch_calls(sandbox)

    faults.unhealthy(CLUSTER, worker, "NvidiaErrorTerminate")
    repair = finished_repair(api, CLUSTER, worker)
    events_handled(sandbox)  # the late copies too

    assert repair["status"] == "SUCCEEDED", repair.get("error")
    assert len(repairs(api, CLUSTER, worker)) == 1
    assert calls_since(sandbox, before) == {"BatchRebootClusterNodes": 0, "BatchReplaceClusterNodes": 1}
    # the copies were delivered: each Unhealthy and Healthy report reached the function twice
    assert sandbox.metrics()["invocations"]["ClusterEventsFunction"]["invocations"] - handled >= 2


def test_an_unhealthy_controller_is_recorded_and_alerted_not_replaced(
    sandbox: Sandbox,
    api: AutopilotClient,
    clusters: tuple[str, str],
    faults: Faults,
    alerts: Callable[[], list[str]],
) -> None:
    [controller] = nodes(sandbox, CLUSTER, CONTROLLER)
    before = batch_calls(sandbox)
    alerts()  # what came before is not this test's

    faults.unhealthy(CLUSTER, controller, "NvidiaErrorTerminate")
    repair = finished_repair(api, CLUSTER, controller)
    about_it = wait_for(
        lambda: [m for m in alerts() if controller in m] or None, what="the controller's alert"
    )

    assert repair["status"] == "SUCCEEDED", repair.get("error")
    assert repair["trigger"] == "event"
    assert [a for a, _ in actions(repair)] == ["alert"]
    assert calls_since(sandbox, before) == {"BatchRebootClusterNodes": 0, "BatchReplaceClusterNodes": 0}
    assert nodes(sandbox, CLUSTER, CONTROLLER) == {controller: "Running"}
    assert len(about_it) == 1


def test_a_reboot_that_does_not_heal_escalates_to_a_replace(
    sandbox: Sandbox, api: AutopilotClient, clusters: tuple[str, str], faults: Faults
) -> None:
    worker = running_workers(sandbox, CLUSTER)[0]
    before = batch_calls(sandbox)

    sandbox.apply_fault("reboot_does_not_heal", {"cluster": CLUSTER, "node_id": worker})
    faults.unhealthy(CLUSTER, worker, "NvidiaErrorReboot")
    repair = finished_repair(api, CLUSTER, worker)

    assert repair["status"] == "SUCCEEDED", repair.get("error")
    assert [a for a, _ in actions(repair)] == ["reboot", "replace"]
    assert actions(repair)[-1] == ("replace", "succeeded")
    assert repair["successorNodeId"] in running_workers(sandbox, CLUSTER)
    assert calls_since(sandbox, before) == {"BatchRebootClusterNodes": 1, "BatchReplaceClusterNodes": 1}
    assert len(repairs(api, CLUSTER, worker)) == 1


def test_a_correlated_storm_trips_the_breaker_and_a_resume_repairs_the_rest_at_the_cap(
    sandbox: Sandbox,
    api: AutopilotClient,
    clusters: tuple[str, str],
    faults: Faults,
    alerts: Callable[[], list[str]],
) -> None:
    storm = running_workers(sandbox, CLUSTER)[:3]  # 3 of 6 nodes: the 2nd report is over 20 %
    before = batch_calls(sandbox)
    alerts()
    faults.unhealthy(CLUSTER, storm[0], "NvidiaErrorTerminate")
    for node in storm[1:]:
        faults.unhealthy(CLUSTER, node, "NvidiaErrorTerminate", storm=True)

    healing = wait_for(
        lambda: h if (h := api.get_healing(CLUSTER))["paused"] else None, what="a paused cluster"
    )
    assert healing["pausedBy"] == "breaker"
    assert healing["breaker"]["unhealthyInWindow"] >= 2
    assert healing["breaker"]["trippedAt"]
    # Every copy of the storm's events handled: no more repair calls than the slot taken before the
    # trip (the first repair's, if it took its slot before the trip; else it waits, paused) and one
    # alert. The resume comes well within that waiting repair's deadline (ReplaceDeadlineMinutes).
    trips = wait_for(
        lambda: [m for m in alerts() if "Healing Paused" in m] or None, what="the breaker's alert"
    )
    events_handled(sandbox)
    trips += [m for m in alerts() if "Healing Paused" in m]
    paused_calls = calls_since(sandbox, before)
    assert paused_calls["BatchRebootClusterNodes"] == 0
    assert paused_calls["BatchReplaceClusterNodes"] <= PARAMETERS["MaxConcurrentRepairs"]
    assert api.get_healing(CLUSTER)["paused"]
    assert len(trips) == 1
    assert json.loads(trips[0])["clusterName"] == CLUSTER

    resumed = api.set_healing(CLUSTER, paused=False)
    assert resumed["paused"] is False
    # While the rest are repaired, the slots in use (GET .../healing activeRepairs, the lease holders)
    # never exceed MaxConcurrentRepairs (1). The operations' own times cannot tell: the workflow stamps
    # its actions on the sandbox clock, the functions the operation on the wall clock.
    slots_seen: set[int] = set()

    def all_repaired() -> list[dict[str, Any]] | None:
        slots_seen.add(api.get_healing(CLUSTER)["activeRepairs"])
        found = [repairs(api, CLUSTER, node) for node in storm]
        ended = all(ops and all(o["status"] != "RUNNING" for o in ops) for ops in found)
        return [ops[0] for ops in found] if ended else None

    # three replacements one after another (the cap is 1), each with its waits for a slot: 81 s of wall
    # time on an idle CI machine, over 120 s with the slow tier beside make test (CI saw it)
    done = wait_for(all_repaired, what="the storm's repairs", deadline_s=3 * DEADLINE_S)

    assert all(r["status"] == "SUCCEEDED" for r in done), [r.get("error") for r in done]
    assert {r["trigger"] for r in done[1:]} <= {"event", "sweep"}
    assert all(len(repairs(api, CLUSTER, node)) == 1 for node in storm)
    assert calls_since(sandbox, before)["BatchReplaceClusterNodes"] == len(storm)
    assert max(slots_seen) == PARAMETERS["MaxConcurrentRepairs"], slots_seen
    assert len(running_workers(sandbox, CLUSTER)) == 4
    assert not (set(storm) & set(running_workers(sandbox, CLUSTER)))


def test_with_node_recovery_automatic_hyperpod_repairs_and_autopilot_records_without_acting(
    sandbox: Sandbox, api: AutopilotClient, clusters: tuple[str, str], faults: Faults
) -> None:
    worker = running_workers(sandbox, AUTOMATIC)[0]
    before = batch_calls(sandbox)

    faults.unhealthy(AUTOMATIC, worker, "NvidiaErrorTerminate")
    repair = finished_repair(api, AUTOMATIC, worker)

    assert repair["status"] == "SUCCEEDED", repair.get("error")
    assert (repair["trigger"], repair["actor"]) == ("event", "hyperpod")
    assert {a for a, _ in actions(repair)} == {"observe"}
    assert calls_since(sandbox, before) == {"BatchRebootClusterNodes": 0, "BatchReplaceClusterNodes": 0}
    assert worker not in running_workers(sandbox, AUTOMATIC)
    assert len(running_workers(sandbox, AUTOMATIC)) == 4
