"""ClusterEventsFunction's use case: one message of the cluster-events queue.

Two kinds of message share the queue (docs/architecture.md, "Event-driven waits"):
- HyperPod's EventBridge events. A Cluster State Change updates the registry's SageMaker status (when
  newer than what it holds), resumes the workflows waiting on the cluster and ends the scales it
  finished. A Node Health event is held on the node's item and may start a repair
  (autopilot.logic.healing.node_health). Cluster Events are logged; an Error one about an instance is
  a failed launch, diagnosed and announced once (autopilot.logic.launch_watch).
- A workflow's wait request ("await-cluster"): the waiter is stored first, then DescribeCluster is
  checked once, so a state change that came before the request still resumes it at once.

Every step is idempotent: a duplicate or a stale message finds the registry newer and the waiter
answered (its token no longer waits).

An event is acted on only when it is authentic (``untrusted``): anyone allowed ``sqs:SendMessage`` on
the queue, or an event of another account or cluster, could otherwise fail a create or replace a
node. An untrusted event is dropped with a WARNING and a count, never an error (a redrive would only
bring it back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from autopilot import clock
from autopilot.logic.healing.node_health import NodeHealing, node_health_reported
from autopilot.logic.launch_watch import LaunchWatch, launch_failed, update_over
from autopilot.models.envelopes import EventBridgeModel
from autopilot.models.hyperpod_events import (
    AWAIT_CLUSTER,
    AWAIT_NODE,
    CLUSTER_EVENT,
    NODE_HEALTH,
    STATE_CHANGE,
    AwaitCluster,
    AwaitNode,
    ClusterEvent,
    ClusterStateChangeEvent,
    NodeHealthEvent,
)
from autopilot.observability import Count, count, logger
from autopilot.workflows.cluster_waits import ClusterWaits, StatusVersion, Waiter
from autopilot.workflows.node_waits import await_node

# The lifecycle order of ClusterStatus values, to order two reports of the same second.
_RANK = {
    "Creating": 1,
    "Updating": 2,
    "SystemUpdating": 2,
    "RollingBack": 3,
    "InService": 4,
    "Failed": 5,
    "Deleting": 6,
}


# What handle_message returns for an event it dropped as untrusted.
UNTRUSTED = "untrusted"
SAGEMAKER_SOURCE = "aws.sagemaker"


class UnknownMessageError(ValueError):
    """The message is neither a HyperPod event nor a wait request (it goes to the DLQ)."""


@dataclass(frozen=True)
class Origin:
    """Where HyperPod's events for this function come from: its own account and region (the
    invoked function ARN's and AWS_REGION, so no AWS call per event)."""

    account: str
    region: str

    @classmethod
    def of_function(cls, invoked_function_arn: str) -> Origin:
        # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
        parts = invoked_function_arn.split(":")
        return cls(account=parts[4], region=parts[3])


def handle_message(
    body: dict[str, Any],
    sent_at: int,
    waits: ClusterWaits,
    healing: NodeHealing | None = None,
    *,
    origin: Origin,
    launches: LaunchWatch | None = None,
) -> str:
    """Process one queue message; returns what it was (for logs and tests). ``healing`` is required
    for Node Health events, ``launches`` to follow scales and failed launches (ClusterEventsFunction
    always passes both)."""
    if body.get("autopilot") == AWAIT_CLUSTER:
        await_cluster(AwaitCluster.model_validate(body), sent_at, waits)
        return AWAIT_CLUSTER
    if body.get("autopilot") == AWAIT_NODE:
        await_node(AwaitNode.model_validate(body), sent_at, waits)
        return AWAIT_NODE
    detail_type = body.get("detail-type")
    try:
        if detail_type == STATE_CHANGE:
            changed = ClusterStateChangeEvent.model_validate(body)
            if untrusted(changed, changed.detail.ClusterName, changed.detail.ClusterArn, origin, waits):
                return UNTRUSTED
            cluster_state_changed(changed, waits, launches)
        elif detail_type == NODE_HEALTH:
            health = NodeHealthEvent.model_validate(body)
            if untrusted(health, health.detail.ClusterName, health.detail.ClusterArn, origin, waits):
                return UNTRUSTED
            if healing is None:
                raise RuntimeError("a Node Health event needs the healing dependencies (NodeHealing)")
            node_health_reported(health, healing, waits)
        elif detail_type == CLUSTER_EVENT:
            reported = ClusterEvent.model_validate(body)
            details = reported.detail.EventDetails
            if untrusted(reported, details.ClusterName, details.ClusterArn, origin, waits):
                return UNTRUSTED
            cluster_event_reported(reported)
            if launches is not None:
                launch_failed(reported, launches, now=clock.now())
        else:
            raise UnknownMessageError(f"unknown message (detail-type {detail_type!r})")
    except ValidationError as exc:
        raise UnknownMessageError(f"{detail_type} does not have AWS's shape: {exc}") from exc
    return str(detail_type)


def untrusted(
    event: EventBridgeModel, cluster_name: str, cluster_arn: str, origin: Origin, waits: ClusterWaits
) -> bool:
    """True (logged and counted as untrusted) unless the event is SageMaker's, of this account and
    region, and about the cluster Autopilot registered under that name (a cluster of the same name
    elsewhere, or one deleted and recreated outside Autopilot, has another ARN); True too, quietly,
    for a cluster Autopilot does not manage."""
    reason = None
    if event.source != SAGEMAKER_SOURCE:
        reason = "source"
    elif event.account != origin.account:
        reason = "account"
    elif event.region != origin.region:
        reason = "region"
    else:
        registered = waits.registered_arn(cluster_name)
        if registered is None:
            # Not Autopilot's cluster: nothing acts on it (the registry is not updated, no repair).
            logger.info(
                "event of a cluster Autopilot does not manage", cluster=cluster_name, event_id=event.id
            )
            return True
        if registered != cluster_arn:
            reason = "cluster"
    if reason is None:
        return False
    logger.warning(
        "untrusted event dropped",
        reason=reason,
        source=event.source,
        account=event.account,
        region=event.region,
        cluster=cluster_name,
        cluster_arn=cluster_arn,
        event_id=event.id,
    )
    count(Count.UNTRUSTED_EVENTS_DROPPED)
    return True


def await_cluster(request: AwaitCluster, sent_at: int, waits: ClusterWaits) -> None:
    waiter = Waiter(
        cluster_name=request.cluster_name,
        execution_arn=request.execution_arn,
        until=request.until,
        task_token=request.task_token,
        sent_at=sent_at,
    )
    if not waits.put_waiter(waiter):
        logger.info("stale wait request ignored", cluster=waiter.cluster_name, execution=waiter.execution_arn)
        return
    status, failure = waits.describe_status(waiter.cluster_name)
    resume(waiter, status, failure, waits)


def cluster_state_changed(
    event: ClusterStateChangeEvent, waits: ClusterWaits, launches: LaunchWatch | None = None
) -> None:
    detail = event.detail
    version = StatusVersion(time=event.time, rank=_RANK.get(detail.ClusterStatus, 0))
    newer = waits.record_status(detail.ClusterName, detail.ClusterArn, detail.ClusterStatus, version)
    logger.info(
        "cluster state change",
        cluster=detail.ClusterName,
        status=detail.ClusterStatus,
        recorded=newer,
        event_id=event.id,
    )
    if not newer:
        # A duplicate, an older report, or a cluster Autopilot does not manage: its waiters (if any)
        # were resumed by the newer report or will be by their own DescribeCluster check.
        return
    for waiter in waits.waiters(detail.ClusterName):
        resume(waiter, detail.ClusterStatus, detail.FailureMessage, waits)
    if launches is not None:
        update_over(event, launches)


def resume(waiter: Waiter, status: str, failure_message: str, waits: ClusterWaits) -> None:
    """Resume the waiter if the cluster reached what it waits for, or failed; else leave it waiting.

    A failed cluster resumes the wait with its status too (not SendTaskFailure): the workflow names
    the error, and the FailureMessage travels in the output, which every Step Functions keeps.
    """
    if status not in (waiter.until, "Failed"):
        return
    answered = waits.succeed(waiter, {"ClusterStatus": status, "FailureMessage": failure_message})
    logger.info(
        "workflow resumed" if answered else "waiter no longer waiting",
        cluster=waiter.cluster_name,
        execution=waiter.execution_arn,
        status=status,
    )
    waits.remove_waiter(waiter)


def cluster_event_reported(event: ClusterEvent) -> None:
    details = event.detail.EventDetails
    logger.info(
        "cluster event",
        cluster=details.ClusterName,
        event_id=details.EventId,
        level=details.EventLevel,
        resource_type=details.ResourceType,
        description=details.Description,
    )
