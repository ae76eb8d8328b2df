"""ReconcilerFunction: on a schedule, every RUNNING operation whose execution ended or never started is
recorded FAILED and its cluster settled (autopilot.logic.reconcile)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from autopilot import aws
from autopilot.dal.state_table import StateTable
from autopilot.logic.reconcile import reconcile
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics
from autopilot.settings import ReconcilerSettings, reconciler_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient


class Deps(NamedTuple):
    settings: ReconcilerSettings
    store: StateTable
    stepfunctions: SFNClient
    sagemaker: SageMakerClient
    events: EventBridgeClient


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    settings = reconciler_settings()
    return Deps(
        settings=settings,
        store=StateTable(settings.state_table_name),
        stepfunctions=aws.client("stepfunctions"),
        sagemaker=aws.client("sagemaker"),
        events=aws.client("events"),
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The schedule's time is "now": the grace period counts from it (the sandbox's clock in the sandbox).
    scheduled = EventBridgeModel.model_validate(event)
    found = deps()
    return reconcile(
        scheduled.time,
        settings=found.settings,
        store=found.store,
        stepfunctions=found.stepfunctions,
        sagemaker=found.sagemaker,
        events=found.events,
    )
