"""Nothing dies silently: an operation whose workflow execution ended without recording its outcome
(FAILED by an uncaught error, ABORTED by StopExecution, TIMED_OUT, or never started) is recorded
FAILED with the execution's error and cause, and its cluster is put in the lifecycle state SageMaker
agrees with.

Reached from the Step Functions "Execution Status Change" event (RecordOutcomeFunction) and from the
scheduled reconciler (``autopilot.logic.reconcile``). Idempotent: an operation already SUCCEEDED or
FAILED is left alone, and the cluster only changes while this operation still holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from autopilot.dal.state_store import StateStore
from autopilot.emitted_events import emit_operation_failed
from autopilot.models.execution_status import ExecutionStatus, ExecutionStatusChangeDetail
from autopilot.models.records import (
    ClusterStatus,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
)
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient

IN_SERVICE = "InService"
# The error recorded when the execution itself names none (a StopExecution without error, a timeout).
_FALLBACK_ERRORS = {
    ExecutionStatus.ABORTED: "Autopilot.ExecutionAborted",
    ExecutionStatus.TIMED_OUT: "Autopilot.ExecutionTimedOut",
    ExecutionStatus.FAILED: "Autopilot.ExecutionFailed",
    ExecutionStatus.SUCCEEDED: "Autopilot.OutcomeNotRecorded",
}
WORKFLOW_NOT_STARTED = "Autopilot.WorkflowNotStarted"


class Resolution(StrEnum):
    RECORDED = "recorded"  # the operation is now FAILED and its cluster consistent
    ALREADY_FINAL = "already_final"  # the workflow (or an earlier delivery) had recorded an outcome
    NOT_AN_OPERATION = "not_an_operation"  # the execution is not one of Autopilot's operations


@dataclass(frozen=True)
class ExecutionEnd:
    """How an operation's execution ended (or that it never started)."""

    execution_arn: str
    status: ExecutionStatus | None  # None: the execution does not exist
    error: str | None = None
    cause: str | None = None
    stopped_at: datetime | None = None

    def operation_error(self) -> OperationError:
        if self.status is None:
            return OperationError(
                error=WORKFLOW_NOT_STARTED,
                cause=f"no execution {self.execution_arn} exists: the workflow was never started "
                "(StartExecution did not happen after the operation was recorded)",
            )
        error = self.error or _FALLBACK_ERRORS.get(self.status, "Autopilot.ExecutionFailed")
        when = f" at {self.stopped_at.astimezone(UTC).isoformat()}" if self.stopped_at else ""
        cause = self.cause or f"the execution {self.execution_arn} ended {self.status.value}{when}"
        return OperationError(error=error, cause=cause)


def cluster_status_after_failure(
    operation_type: OperationType, sagemaker_status: str | None
) -> ClusterStatus:
    """Where the cluster stands once its operation failed, by what SageMaker says (None: no cluster).

    A create whose cluster is nonetheless InService made a working cluster: ACTIVE. Any other create
    failed (a cluster still Creating or Failed can be deleted, a missing one's name reused). A cleanup
    whose cluster is gone did delete it; otherwise the cluster is there to delete again.
    """
    if operation_type is OperationType.CREATE_CLUSTER:
        return ClusterStatus.ACTIVE if sagemaker_status == IN_SERVICE else ClusterStatus.CREATE_FAILED
    return ClusterStatus.DELETED if sagemaker_status is None else ClusterStatus.DELETE_FAILED


def sagemaker_cluster_status(sagemaker: SageMakerClient, cluster_name: str) -> str | None:
    try:
        return str(sagemaker.describe_cluster(ClusterName=cluster_name)["ClusterStatus"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("ResourceNotFound", "ResourceNotFoundException"):
            return None
        raise


def describe_execution_end(stepfunctions: SFNClient, execution_arn: str) -> ExecutionEnd:
    """The execution as DescribeExecution reports it (status None when it does not exist)."""
    try:
        described = stepfunctions.describe_execution(executionArn=execution_arn)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            return ExecutionEnd(execution_arn, None)
        raise
    return ExecutionEnd(
        execution_arn,
        ExecutionStatus(described["status"]),
        error=described.get("error") or None,
        cause=described.get("cause") or None,
        stopped_at=described.get("stopDate"),
    )


def fail_operation(
    operation: Operation,
    end: ExecutionEnd,
    *,
    store: StateStore,
    sagemaker: SageMakerClient,
    events: EventBridgeClient,
    now: datetime,
) -> Resolution:
    """Record ``operation`` FAILED with the cause of ``end`` and settle its cluster; emit the failure."""
    if operation.status is not OperationStatus.RUNNING:
        return Resolution.ALREADY_FINAL
    if operation.operation_type is OperationType.REPLACE_NODE:
        # A repair never holds its cluster (it is never the cluster's lastOperationId): the cluster stays
        # as it is, so SageMaker's view of it is not needed. Its node and lease are freed by the sweep.
        seen, cluster_status = None, ClusterStatus.ACTIVE
    else:
        seen = sagemaker_cluster_status(sagemaker, operation.cluster_name)
        cluster_status = cluster_status_after_failure(operation.operation_type, seen)
    error = end.operation_error()
    recorded = store.fail_running_operation(
        operation,
        error,
        cluster_status=cluster_status,
        sagemaker_status=seen,
        now=now,
    )
    if not recorded:
        return Resolution.ALREADY_FINAL
    logger.warning(
        "operation recorded failed after its execution ended",
        operation_id=operation.operation_id,
        cluster=operation.cluster_name,
        execution_status=end.status.value if end.status else "NOT_STARTED",
        error=error.error,
        cluster_status=cluster_status.value,
        sagemaker_status=seen,
    )
    emit_operation_failed(
        operation, error, execution_arn=end.execution_arn if end.status else None, client=events
    )
    return Resolution.RECORDED


def record_outcome(
    detail: ExecutionStatusChangeDetail,
    *,
    store: StateStore,
    stepfunctions: SFNClient,
    sagemaker: SageMakerClient,
    events: EventBridgeClient,
    now: datetime,
) -> Resolution:
    """An Autopilot execution ended FAILED / ABORTED / TIMED_OUT: make sure its operation says so.

    The execution is named after its operation (the API starts it with ``name=operationId``), so the
    event's ``name`` finds the operation even when the API never stored the execution ARN.
    """
    operation = store.get_operation(detail.name)
    if operation is None or (operation.execution_arn and operation.execution_arn != detail.executionArn):
        logger.info("execution is not an Autopilot operation", execution_arn=detail.executionArn)
        return Resolution.NOT_AN_OPERATION
    if operation.status is not OperationStatus.RUNNING:
        return Resolution.ALREADY_FINAL
    end = ExecutionEnd(
        detail.executionArn, detail.status, error=detail.error, cause=detail.cause, stopped_at=detail.stopDate
    )
    if end.error is None and end.cause is None:
        # AWS's samples of this event carry no error/cause; DescribeExecution has them when there are any.
        described = describe_execution_end(stepfunctions, detail.executionArn)
        end = ExecutionEnd(
            detail.executionArn,
            detail.status,
            error=described.error,
            cause=described.cause,
            stopped_at=detail.stopDate or described.stopped_at,
        )
    return fail_operation(operation, end, store=store, sagemaker=sagemaker, events=events, now=now)
