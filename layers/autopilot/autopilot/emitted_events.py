"""Autopilot's own EventBridge events (default bus): one per finished cluster operation.

The state machines emit them with ``events:putEvents``; the API emits the failure event itself when
a workflow could not even start. An EventBridge rule forwards every event with this source to the
NotificationsTopic, and the failures also to the AlertsTopic. ``OperationEventDetail`` is the
contract (tests check the state machines' Detail against it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from autopilot import aws
from autopilot.models.records import Diagnosis

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient

    from autopilot.models.records import Operation, OperationError

SOURCE = "hyperpod.autopilot"
OPERATION_SUCCEEDED = "Cluster Operation Succeeded"
OPERATION_FAILED = "Cluster Operation Failed"
# A ReplaceNode operation's result (statemachines/replace_node.asl.json).
NODE_REPAIRED = "Node Repaired"
NODE_REPAIR_FAILED = "Node Repair Failed"
DETAIL_TYPES = (OPERATION_SUCCEEDED, OPERATION_FAILED, NODE_REPAIRED, NODE_REPAIR_FAILED)
SESSION_TERMINATED = "Session Terminated"
# A Continuous cluster's background launch failed (logic/launch_watch.py); FailedOperationsRule sends
# it to the alerts topic.
NODE_LAUNCH_FAILED = "Node Launch Failed"
# The healing sweep had a cluster's Slurm agent resume a node Slurm downed after a reboot
# (logic/healing/slurm_signal.py).
SLURM_NODE_RESUME_REQUESTED = "Slurm Node Resume Requested"


def put_event(
    client: EventBridgeClient, detail_type: str, detail: str, *, resources: Sequence[str] = ()
) -> None:
    """Put one Autopilot event (``detail``: its JSON) on the default bus; raises if EventBridge
    rejects it (PutEvents answers 200 with the entry failed, not an error)."""
    response = client.put_events(
        Entries=[
            {
                "Source": SOURCE,
                "DetailType": detail_type,
                "Detail": detail,
                "Resources": list(resources),
                "EventBusName": "default",
            }
        ]
    )
    if response.get("FailedEntryCount", 0):
        raise RuntimeError(f"EventBridge rejected the {detail_type} event: {response.get('Entries')}")


class OperationEventDetail(BaseModel):
    """The ``detail`` of an Autopilot operation event."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    operation_id: str
    operation_type: str
    cluster_name: str
    status: str  # SUCCEEDED | FAILED
    execution_arn: str | None = None
    error: str | None = None
    cause: str | None = None
    # Cleanup: ARNs of resources still tagged with the cluster (as a JSON list in a string).
    leftovers: str | None = None
    # ReplaceNode: the repaired node, and the new instance a replace brought.
    node_id: str | None = None
    successor_node_id: str | None = None
    # A failed create: why, from HyperPod's lifecycle logs (null when it could not be diagnosed).
    diagnosis: Diagnosis | None = None


def emit_operation_event(detail: OperationEventDetail, *, client: EventBridgeClient | None = None) -> None:
    """Put one operation event on the bus; raises if EventBridge rejects it."""
    events: EventBridgeClient = client or aws.client("events")
    succeeded = detail.status == "SUCCEEDED"
    if detail.operation_type == "ReplaceNode":
        detail_type = NODE_REPAIRED if succeeded else NODE_REPAIR_FAILED
    else:
        detail_type = OPERATION_SUCCEEDED if succeeded else OPERATION_FAILED
    put_event(events, detail_type, detail.model_dump_json(by_alias=True, exclude_none=True))


def emit_operation_failed(
    operation: Operation,
    error: OperationError,
    *,
    execution_arn: str | None = None,
    client: EventBridgeClient | None = None,
) -> None:
    """The failure event of an operation whose workflow could not report it (never started, or died)."""
    emit_operation_event(
        OperationEventDetail(
            operation_id=operation.operation_id,
            operation_type=operation.operation_type.value,
            cluster_name=operation.cluster_name,
            status="FAILED",
            execution_arn=execution_arn,
            error=error.error,
            cause=error.cause,
            node_id=operation.node_id,
        ),
        client=client,
    )


class SessionTerminatedEventDetail(BaseModel):
    """The ``detail`` of a ``Session Terminated`` event (SessionGuard ended an SSM session)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str
    session_id: str
    target: str
    principal: str
    reason: str  # over-limit | run-as-missing | run-as-forbidden
    trigger: str  # event | schedule
    limit: int | None = None
    run_as: str | None = None


def emit_session_terminated(detail: SessionTerminatedEventDetail, *, client: EventBridgeClient) -> None:
    """Put one ``Session Terminated`` event on the bus; raises if EventBridge rejects it."""
    put_event(client, SESSION_TERMINATED, detail.model_dump_json(by_alias=True, exclude_none=True))


HEALING_PAUSED = "Healing Paused"


class HealingPausedEventDetail(BaseModel):
    """The ``detail`` of a ``Healing Paused`` event: the breaker stopped automatic repairs on a cluster
    (autopilot.logic.healing.breaker); an operator resumes them with PUT /clusters/{name}/healing."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str
    paused_by: str  # "breaker"
    reason: str
    paused_at: str
    # the nodes reported Unhealthy within the window, out of node_count
    unhealthy_nodes: list[str]
    node_count: int
    max_unhealthy_percent: int
    window_minutes: int


def emit_healing_paused(detail: HealingPausedEventDetail, *, client: EventBridgeClient) -> None:
    """Put one ``Healing Paused`` event on the bus; raises if EventBridge rejects it."""
    put_event(client, HEALING_PAUSED, detail.model_dump_json(by_alias=True, exclude_none=True))


HEALING_RESUMED = "Healing Resumed"


class HealingResumedEventDetail(BaseModel):
    """The ``detail`` of a ``Healing Resumed`` event: an operator resumed a cluster's automatic repairs
    (PUT /clusters/{name}/healing, autopilot.logic.healing_control); HealingSweepFunction sweeps that
    cluster on it, so the nodes left Unhealthy while paused get their repairs."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str
    resumed_by: str  # the caller's principal ARN
    resumed_at: str


def emit_healing_resumed(detail: HealingResumedEventDetail, *, client: EventBridgeClient) -> None:
    """Put one ``Healing Resumed`` event on the bus; raises if EventBridge rejects it."""
    put_event(client, HEALING_RESUMED, detail.model_dump_json(by_alias=True, exclude_none=True))


class NodeLaunchFailedEventDetail(BaseModel):
    """The ``detail`` of a ``Node Launch Failed`` event: HyperPod could not bring up an instance of a
    Continuous cluster (an Error Cluster Event) and retries in the background; why, from its logs."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str
    instance_group_name: str | None = None
    node_id: str
    # the Cluster Event that reported it (ListClusterEvents / DescribeClusterEvent)
    event_id: str
    description: str
    failure_message: str | None = None
    diagnosis: Diagnosis


def emit_node_launch_failed(detail: NodeLaunchFailedEventDetail, *, client: EventBridgeClient) -> None:
    """Put one ``Node Launch Failed`` event on the bus; raises if EventBridge rejects it."""
    put_event(client, NODE_LAUNCH_FAILED, detail.model_dump_json(by_alias=True, exclude_none=True))
