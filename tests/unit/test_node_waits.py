"""The repairs' node waits ("await-node"): answered at once, on the node's Healthy event, or when the
node is gone; never on a node HMA still reports unhealthy, never for another node or a cluster wait."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.logic.cluster_events import Origin, handle_message
from autopilot.models.hyperpod_events import AWAIT_NODE
from autopilot.models.records import NodeHealth
from autopilot.workflows.cluster_waits import ClusterWaits, Waiter
from autopilot.workflows.node_waits import node_health_changed
from pydantic import ValidationError

CLUSTER = "ml-cluster"
NODE = "i-0123456789abcdef0"
# await requests need no origin; every handle_message call names one
ORIGIN = Origin(account="111122223333", region="us-west-2")
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:replace-node:op-1"


class MemoryWaits(ClusterWaits):
    """Waiter items, SageMaker's node status, the node items' health and SendTaskSuccess in memory."""

    def __init__(self) -> None:
        super().__init__("unused")
        self.stored: dict[str, Waiter] = {}
        self.answered: list[tuple[str, dict[str, Any]]] = []
        self.status: dict[str, str] = {}
        self.health: dict[str, NodeHealth] = {}

    def put_waiter(self, waiter: Waiter) -> bool:
        held = self.stored.get(waiter.execution_arn)
        if held is not None and held.sent_at > waiter.sent_at:
            return False
        self.stored[waiter.execution_arn] = waiter
        return True

    def _waiters(self, cluster_name: str) -> list[Waiter]:
        return [w for w in self.stored.values() if w.cluster_name == cluster_name]

    def remove_waiter(self, waiter: Waiter) -> None:
        if self.stored.get(waiter.execution_arn) == waiter:
            del self.stored[waiter.execution_arn]

    def succeed(self, waiter: Waiter, output: dict[str, Any]) -> bool:
        self.answered.append((waiter.task_token, output))
        return True

    def describe_node_status(self, cluster_name: str, node_id: str) -> str:
        return self.status.get(node_id, "NotFound")

    def node_health(self, cluster_name: str, node_id: str) -> NodeHealth | None:
        return self.health.get(node_id)


def request(node_id: str = NODE, *, token: str = "token-1", execution: str = EXECUTION) -> dict[str, Any]:
    return {
        "autopilot": AWAIT_NODE,
        "clusterName": CLUSTER,
        "nodeId": node_id,
        "until": "Healthy",
        "taskToken": token,
        "executionArn": execution,
    }


def test_a_running_node_with_no_unhealthy_report_is_answered_at_once() -> None:
    waits = MemoryWaits()
    waits.status[NODE] = "Running"  # a replace's successor: no node item

    assert handle_message(request(), 1000, waits, origin=ORIGIN) == AWAIT_NODE

    assert waits.answered == [("token-1", {"InstanceStatus": "Running", "HealthStatus": "Healthy"})]
    assert waits.stored == {}


def test_a_running_node_hma_still_reports_unhealthy_waits_for_its_healthy_event() -> None:
    waits = MemoryWaits()
    waits.status[NODE] = "Running"
    waits.health[NODE] = NodeHealth.UNHEALTHY
    handle_message(request(), 1000, waits, origin=ORIGIN)
    assert waits.answered == []

    node_health_changed(CLUSTER, NODE, NodeHealth.UNHEALTHY, waits)  # a reboot that did not heal
    assert waits.answered == []

    node_health_changed(CLUSTER, NODE, NodeHealth.HEALTHY, waits)
    assert waits.answered == [("token-1", {"InstanceStatus": "Running", "HealthStatus": "Healthy"})]
    assert waits.stored == {}


def test_a_healthy_event_before_the_node_runs_again_leaves_the_wait_on() -> None:
    waits = MemoryWaits()
    waits.status[NODE] = "Pending"  # rebooting
    handle_message(request(), 1000, waits, origin=ORIGIN)

    node_health_changed(CLUSTER, NODE, NodeHealth.HEALTHY, waits)

    assert waits.answered == []
    assert list(waits.stored) == [EXECUTION]


@pytest.mark.parametrize("status", ["NotFound", "ShuttingDown"])
def test_a_node_that_is_gone_is_answered_so_the_repair_looks_for_its_successor(status: str) -> None:
    waits = MemoryWaits()
    waits.health[NODE] = NodeHealth.UNHEALTHY
    if status != "NotFound":
        waits.status[NODE] = status

    handle_message(request(), 1000, waits, origin=ORIGIN)

    assert waits.answered == [("token-1", {"InstanceStatus": status, "HealthStatus": "Unknown"})]


def test_only_the_waits_on_that_node_resume_and_cluster_waits_never_see_them() -> None:
    waits = MemoryWaits()
    other = "i-0fedcba9876543210"
    waits.status.update({NODE: "Running", other: "Running"})
    waits.health.update({NODE: NodeHealth.UNHEALTHY, other: NodeHealth.UNHEALTHY})
    handle_message(request(), 1000, waits, origin=ORIGIN)
    handle_message(request(other, token="token-2", execution=EXECUTION + "-2"), 1000, waits, origin=ORIGIN)
    cluster_wait = Waiter(
        cluster_name=CLUSTER, execution_arn="create", until="InService", task_token="token-3", sent_at=1
    )
    waits.put_waiter(cluster_wait)

    node_health_changed(CLUSTER, other, NodeHealth.HEALTHY, waits)

    assert [token for token, _ in waits.answered] == ["token-2"]
    assert waits.waiters(CLUSTER) == [cluster_wait]
    assert [w.task_token for w in waits.node_waiters(CLUSTER, NODE)] == ["token-1"]


def test_an_older_request_of_the_same_execution_is_ignored() -> None:
    waits = MemoryWaits()
    waits.status[NODE] = "Pending"
    handle_message(request(token="newer"), 2000, waits, origin=ORIGIN)

    handle_message(request(token="older"), 1000, waits, origin=ORIGIN)

    assert waits.stored[EXECUTION].task_token == "newer"


def test_a_request_for_anything_but_healthy_is_refused() -> None:
    with pytest.raises(ValidationError):
        handle_message({**request(), "until": "Running"}, 1000, MemoryWaits(), origin=ORIGIN)


@pytest.mark.parametrize("status", ["DetachInProgress", "AttachInProgress"])
def test_a_node_moveclusternodes_is_moving_resumes_the_repair_to_end_it(status: str) -> None:
    waits = MemoryWaits()
    waits.status[NODE] = status

    handle_message(request(), 1000, waits, origin=ORIGIN)

    assert waits.answered == [("token-1", {"InstanceStatus": status, "HealthStatus": "Unknown"})]
