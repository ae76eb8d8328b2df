"""The scheduled reconciler: no operation stays RUNNING without a live execution.

Catches what the Execution Status Change event cannot: a StartExecution that never happened after the
API recorded the operation (a connection error, a crash), and an event EventBridge did not deliver
(best effort). Each RUNNING operation's execution is described; one that ended, or that still does
not exist ``grace_seconds`` after the operation was recorded, fails the operation as
``autopilot.logic.record_outcome`` does.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from autopilot.dal.state_store import StateStore
from autopilot.logic.record_outcome import Resolution, describe_execution_end, fail_operation
from autopilot.models.execution_status import ExecutionStatus
from autopilot.models.records import Operation, OperationType
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.settings import ReconcilerSettings

# Operations older than this are not read again: every workflow ends within its deadline (hours), and
# the reconciler has looked at an operation a few thousand times by then.
LOOKBACK = timedelta(days=14)
STILL_RUNNING = "still_running"
WAITING_FOR_START = "waiting_for_start"


def execution_arn_for(settings: ReconcilerSettings, operation: Operation) -> str:
    """The execution the API starts for ``operation``: its state machine's, named after the operation."""
    state_machine = settings.cleanup_cluster_state_machine_arn
    if operation.operation_type is OperationType.CREATE_CLUSTER:
        state_machine = settings.create_cluster_state_machine_arn
    elif operation.operation_type is OperationType.REPLACE_NODE:
        state_machine = settings.replace_node_state_machine_arn
    return f"{state_machine.replace(':stateMachine:', ':execution:', 1)}:{operation.operation_id}"


def reconcile(
    now: datetime,
    *,
    settings: ReconcilerSettings,
    store: StateStore,
    stepfunctions: SFNClient,
    sagemaker: SageMakerClient,
    events: EventBridgeClient,
) -> dict[str, int]:
    """Resolve every RUNNING operation whose execution is not running; how many of each outcome."""
    outcomes: Counter[str] = Counter()
    for operation in store.list_running_operations(created_after=now - LOOKBACK):
        if operation.operation_type is OperationType.SCALE_TO_MIN:
            continue  # no execution: BudgetAlertsFunction's schedule retries it (logic/budget_alerts.py)
        if operation.operation_type is OperationType.SCALE_INSTANCE_GROUP:
            continue  # no execution: ended by HyperPod's state change (logic/launch_watch.py)
        execution_arn = operation.execution_arn or execution_arn_for(settings, operation)
        end = describe_execution_end(stepfunctions, execution_arn)
        if end.status is ExecutionStatus.RUNNING:
            outcomes[STILL_RUNNING] += 1
            continue
        if end.status is None and now - operation.created_at < timedelta(seconds=settings.grace_seconds):
            outcomes[WAITING_FOR_START] += 1  # the API may be between its record and StartExecution
            continue
        resolution = fail_operation(operation, end, store=store, sagemaker=sagemaker, events=events, now=now)
        outcomes[resolution.value] += 1
    if outcomes[Resolution.RECORDED.value]:
        logger.warning("reconciler resolved operations without a live execution", outcomes=dict(outcomes))
    return dict(outcomes)
