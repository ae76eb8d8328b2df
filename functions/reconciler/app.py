"""ReconcilerFunction: on a schedule, every RUNNING operation whose execution ended or never started is
recorded FAILED and its cluster settled (autopilot.logic.reconcile)."""

from __future__ import annotations

from typing import Any

from autopilot import aws
from autopilot.dal.state_table import StateTable
from autopilot.logic.reconcile import reconcile
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics
from autopilot.settings import reconciler_settings
from aws_lambda_powertools.utilities.typing import LambdaContext


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The schedule's time is "now": the grace period counts from it (the sandbox's clock in the sandbox).
    scheduled = EventBridgeModel.model_validate(event)
    settings = reconciler_settings()
    return reconcile(
        scheduled.time,
        settings=settings,
        store=StateTable(settings.state_table_name),
        stepfunctions=aws.client("stepfunctions"),
        sagemaker=aws.client("sagemaker"),
        events=aws.client("events"),
    )
