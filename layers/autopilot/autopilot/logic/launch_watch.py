"""Node launches that fail after the request that caused them (issue 23): a scale-up's new instances and
a Continuous cluster's background launches. ClusterEventsFunction calls this on HyperPod's events; the
cause is named by the diagnosis core (logic/diagnose_failure.py), as for a failed create.

- A ScaleInstanceGroup on a classic cluster is RUNNING from its UpdateCluster until HyperPod reports the
  update over (a Cluster State Change to InService or Failed, newer than the request). It ends FAILED
  when the group's TargetCount is not the one asked (the update rolled back) or an instance of the
  group launched since the request is in Failure, with the diagnosis of those instances and a
  ``Cluster Operation Failed`` event (the alerts topic); SUCCEEDED otherwise.
- A Continuous cluster's launch that fails (an Error Cluster Event about an instance) has no operation:
  HyperPod retries in the background with new instances. It is diagnosed and announced as a
  ``Node Launch Failed`` event (the alerts topic), at most once per instance.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot.aws import LazyClient
from autopilot.dal.launch_watch import LaunchWatchTable
from autopilot.emitted_events import (
    NodeLaunchFailedEventDetail,
    OperationEventDetail,
    emit_node_launch_failed,
    emit_operation_event,
)
from autopilot.models.records import Operation, OperationError, OperationStatus, utc_ms
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient

    from autopilot.models.hyperpod_events import ClusterEvent, ClusterStateChangeEvent

# The ClusterStatus values an UpdateCluster ends in.
UPDATE_OVER = frozenset({"InService", "Failed"})
SCALE_FAILED = "Autopilot.ScaleUpFailed"


class LaunchWatch:
    """ClusterEventsFunction's dependencies for the watcher (each client made on its first call: most
    messages need none of them)."""

    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
    logs: LazyClient[Any] = LazyClient("logs")  # no mypy-boto3 stubs in the layer
    events: LazyClient[EventBridgeClient] = LazyClient("events")

    def __init__(
        self,
        table: LaunchWatchTable,
        *,
        sagemaker: SageMakerClient | None = None,
        logs: Any = None,
        events: EventBridgeClient | None = None,
    ) -> None:
        self.table = table
        self._sagemaker, self._logs, self._events = sagemaker, logs, events

    @classmethod
    def of(cls, table_name: str) -> LaunchWatch:
        return cls(LaunchWatchTable(table_name))


def update_over(changed: ClusterStateChangeEvent, watch: LaunchWatch) -> list[Operation]:
    """End the cluster's RUNNING scales that this (newer) state change finished; those ended."""
    detail = changed.detail
    if detail.ClusterStatus not in UPDATE_OVER:
        return []
    ended = []
    for operation in watch.table.running_scales(detail.ClusterName):
        if changed.time < operation.created_at:
            continue  # a report from before the request (EventBridge keeps no order)
        if _end_scale(operation, changed, watch):
            ended.append(operation)
    return ended


def _end_scale(operation: Operation, changed: ClusterStateChangeEvent, watch: LaunchWatch) -> bool:
    detail = changed.detail
    group = operation.instance_group
    target = next((g.TargetCount for g in detail.InstanceGroups if g.InstanceGroupName == group), None)
    failed = _failed_launches(watch, detail.ClusterName, group, since=operation.created_at)
    if target == operation.instance_count and not failed:
        status, error, diagnosis = OperationStatus.SUCCEEDED, None, None
    else:
        message = detail.FailureMessage or next((m for m in failed.values() if m), "")
        cause = (
            f"instance group {group} did not reach {operation.instance_count} instances"
            f"{f' ({len(failed)} in Failure: {", ".join(failed)})' if failed else ''}: "
            f"{message or 'no FailureMessage'}"
        )
        status, error = OperationStatus.FAILED, OperationError(error=SCALE_FAILED, cause=cause)
        # Only a failure is diagnosed: the diagnosis core and its catalog stay out of ClusterEventsFunction's
        # init (tests/unit/test_cold_start.py).
        from autopilot.logic.diagnose_failure import DiagnoseRequest, diagnose_failure  # noqa: PLC0415

        diagnosis = diagnose_failure(
            DiagnoseRequest(
                cluster_name=detail.ClusterName,
                cluster_arn=detail.ClusterArn,
                failure_message=message,
                instance_ids=list(failed),
            ),
            logs=watch.logs,
            sagemaker=watch.sagemaker,
        )
    if not watch.table.finish_scale(
        operation.operation_id, status=status, at=changed.time, error=error, diagnosis=diagnosis
    ):
        return False  # a duplicate report ended it already
    logger.info(
        "scale ended",
        cluster=detail.ClusterName,
        operation=operation.operation_id,
        status=status.value,
        category=diagnosis.category if diagnosis else None,
    )
    emit_operation_event(
        OperationEventDetail(
            operation_id=operation.operation_id,
            operation_type=operation.operation_type.value,
            cluster_name=detail.ClusterName,
            status=status.value,
            error=error.error if error else None,
            cause=error.cause if error else None,
            diagnosis=diagnosis,
        ),
        client=watch.events,
    )
    return True


def _failed_launches(
    watch: LaunchWatch, cluster: str, group: str | None, *, since: datetime
) -> dict[str, str]:
    """The group's instances launched since ``since`` that are in Failure: id → their status message."""
    failed: dict[str, str] = {}
    token: str | None = None
    while group:
        page = watch.sagemaker.list_cluster_nodes(
            ClusterName=cluster,
            InstanceGroupNameContains=group,
            MaxResults=100,
            **({"NextToken": token} if token else {}),  # type: ignore[arg-type]
        )
        for node in page.get("ClusterNodeSummaries", []):
            status = node.get("InstanceStatus", {})
            if (
                node["InstanceGroupName"] == group
                and status.get("Status") == "Failure"
                and utc_ms(node["LaunchTime"]) >= since
            ):
                failed[node["InstanceId"]] = status.get("Message", "")
        token = page.get("NextToken")
        if not token:
            break
    return failed


def launch_failed(reported: ClusterEvent, watch: LaunchWatch, *, now: datetime) -> bool:
    """Announce a Continuous cluster's failed launch once; False for any other event, or a repeat."""
    details = reported.detail.EventDetails
    instance = details.InstanceId
    if details.EventLevel != "Error" or details.ResourceType != "Instance" or not instance:
        return False
    if not watch.table.claim_launch_failure(details.ClusterName, instance, now=now):
        logger.info("launch failure already announced", cluster=details.ClusterName, node=instance)
        return False
    try:
        from autopilot.logic.diagnose_failure import DiagnoseRequest, diagnose_failure  # noqa: PLC0415  (as above)

        metadata = ((details.EventDetails or {}).get("EventMetadata") or {}).get("Instance") or {}
        failure_message = str(metadata.get("FailureMessage") or "")
        diagnosis = diagnose_failure(
            # the event is this launch's own cluster event: no need to list the cluster's others
            DiagnoseRequest(
                cluster_name=details.ClusterName,
                cluster_arn=details.ClusterArn,
                failure_message=failure_message or details.Description or "",
                instance_ids=[instance],
            ),
            logs=watch.logs,
            sagemaker=watch.sagemaker,
        )
        emit_node_launch_failed(
            NodeLaunchFailedEventDetail(
                cluster_name=details.ClusterName,
                instance_group_name=details.InstanceGroupName,
                node_id=instance,
                event_id=details.EventId,
                description=details.Description or "",
                failure_message=failure_message or None,
                diagnosis=diagnosis,
            ),
            client=watch.events,
        )
    except Exception:
        watch.table.release_launch_failure(details.ClusterName, instance)  # the redelivery announces it
        raise
    logger.warning(
        "node launch failed", cluster=details.ClusterName, node=instance, category=diagnosis.category
    )
    return True
