"""Repairs waiting on a node: the "await-node" requests of statemachines/replace_node.asl.json.

A request is stored as a waiter on the node (autopilot.workflows.cluster_waits, one per execution) and
checked at once, so a node that healed before the request came resumes the repair without an event.
Later, the node's Healthy Node Health Event resumes it (``node_health_changed``, called by the Node
Health branch of autopilot.logic.cluster_events once it holds the report).

A node is what the repair waits for when it is Running and no Unhealthy report is held for it (the
node item's ``health``, autopilot.dal.healing): a node HMA still finds faulty keeps running, so its
InstanceStatus alone does not say a reboot healed it. A node that is gone (NotFound, ShuttingDown)
resumes the repair too: HyperPod replaced it, and the workflow looks for the successor. So does a node
MoveClusterNodes is moving (DetachInProgress, AttachInProgress): the workflow ends the repair, as
moving is not a failure and a moving node cannot be repaired.
"""

from __future__ import annotations

from typing import Any

from autopilot.models.hyperpod_events import AwaitNode
from autopilot.models.records import NodeHealth
from autopilot.observability import logger
from autopilot.workflows.cluster_waits import NODE_NOT_FOUND, ClusterWaits, Waiter

RUNNING = "Running"
_GONE = frozenset({NODE_NOT_FOUND, "ShuttingDown"})
_MOVING = frozenset({"DetachInProgress", "AttachInProgress"})


def await_node(request: AwaitNode, sent_at: int, waits: ClusterWaits) -> None:
    """Store the repair's wait, then answer it at once if the node is already there (or gone)."""
    waiter = Waiter(
        cluster_name=request.cluster_name,
        execution_arn=request.execution_arn,
        until=request.until,
        task_token=request.task_token,
        sent_at=sent_at,
        node_id=request.node_id,
    )
    if not waits.put_waiter(waiter):
        logger.info(
            "stale node wait request ignored", cluster=waiter.cluster_name, execution=waiter.execution_arn
        )
        return
    # No report held (a replace's successor Autopilot never heard of) is no Unhealthy report.
    healthy = waits.node_health(request.cluster_name, request.node_id) is not NodeHealth.UNHEALTHY
    check_node(waiter, healthy, waits)


def node_health_changed(cluster_name: str, node_id: str, health: NodeHealth, waits: ClusterWaits) -> None:
    """A Node Health report newer than the one held: a Healthy one resumes the repairs waiting on the
    node once it is Running; an Unhealthy one leaves them waiting (the workflow's deadline decides)."""
    if health is not NodeHealth.HEALTHY:
        return
    for waiter in waits.node_waiters(cluster_name, node_id):
        check_node(waiter, True, waits)


def check_node(waiter: Waiter, healthy: bool, waits: ClusterWaits) -> None:
    """Answer the waiter if its node is Running and ``healthy``, or gone; else leave it waiting."""
    assert waiter.node_id is not None, "a node waiter names its node"
    status = waits.describe_node_status(waiter.cluster_name, waiter.node_id)
    output: dict[str, Any]
    if status in _GONE | _MOVING:
        output = {"InstanceStatus": status, "HealthStatus": "Unknown"}
    elif status == RUNNING and healthy:
        output = {"InstanceStatus": status, "HealthStatus": NodeHealth.HEALTHY.value}
    else:
        return
    answered = waits.succeed(waiter, output)
    logger.info(
        "repair resumed" if answered else "node waiter no longer waiting",
        cluster=waiter.cluster_name,
        node=waiter.node_id,
        execution=waiter.execution_arn,
        status=status,
    )
    waits.remove_waiter(waiter)
