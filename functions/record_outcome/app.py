"""RecordOutcomeFunction: a Step Functions execution of Autopilot ended FAILED / ABORTED / TIMED_OUT
(EventBridge "Step Functions Execution Status Change") → its operation is recorded FAILED with the
cause and its cluster settled (autopilot.logic.record_outcome)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from autopilot import aws, clock
from autopilot.dal.state_table import StateTable
from autopilot.logic.record_outcome import record_outcome
from autopilot.models.execution_status import ExecutionStatusChange
from autopilot.observability import logger, metrics
from autopilot.settings import record_outcome_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient


class Deps(NamedTuple):
    store: StateTable
    stepfunctions: SFNClient
    sagemaker: SageMakerClient
    events: EventBridgeClient


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    return Deps(
        store=StateTable(record_outcome_settings().state_table_name),
        stepfunctions=aws.client("stepfunctions"),
        sagemaker=aws.client("sagemaker"),
        events=aws.client("events"),
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    change = ExecutionStatusChange.model_validate(event)
    found = deps()
    resolution = record_outcome(
        change.detail,
        store=found.store,
        stepfunctions=found.stepfunctions,
        sagemaker=found.sagemaker,
        events=found.events,
        now=clock.now(),
    )
    logger.info("execution outcome handled", execution_arn=change.detail.executionArn, resolution=resolution)
    return {"resolution": resolution.value}
