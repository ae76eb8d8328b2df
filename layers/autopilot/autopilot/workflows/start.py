"""Starting a workflow for an accepted operation; when Step Functions refuses, the operation is
recorded FAILED and announced, so nothing waits on an execution that never ran."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from autopilot.aws import error_code
from autopilot.emitted_events import emit_operation_failed
from autopilot.errors import WorkflowStartError
from autopilot.models.records import ClusterStatus, Operation, OperationError
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies
    from autopilot.workflows.inputs import WorkflowModel


def start_workflow(
    deps: Dependencies,
    state_machine_arn: str,
    operation: Operation,
    workflow_input: WorkflowModel,
    *,
    failed_status: ClusterStatus,
) -> None:
    try:
        started = deps.stepfunctions.start_execution(
            stateMachineArn=state_machine_arn,
            name=operation.operation_id,
            input=workflow_input.model_dump_json(by_alias=True),
        )
    except ClientError as exc:
        logger.exception("workflow did not start", operation_id=operation.operation_id)
        error = OperationError(error=f"StepFunctions.{error_code(exc)}", cause=str(exc))
        try:
            deps.store.fail_operation(operation.operation_id, operation.cluster_name, failed_status, error)
            emit_operation_failed(operation, error, client=deps.events)
        except ClientError:  # the reconciler fails it once the grace period is over
            logger.exception("failed operation not recorded", operation_id=operation.operation_id)
        raise WorkflowStartError("the workflow could not be started", operation.operation_id) from exc
    try:
        deps.store.set_execution_arn(operation.operation_id, started["executionArn"])
    except ClientError:
        # Bookkeeping only: the execution runs, and readers derive its ARN from the operation id
        # (reconcile.execution_arn_for). A 5xx here would hide an operation that is under way.
        logger.warning("execution ARN not recorded", operation_id=operation.operation_id, exc_info=True)
