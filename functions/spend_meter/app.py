"""SpendMeterFunction: on a schedule (SpendMeterMinutes), each ACTIVE cluster's hourly rate,
month-to-date spend and forecast at list prices; alerts when the forecast reaches the budget
(autopilot.logic.spend_meter)."""

from __future__ import annotations

from typing import Any

from autopilot import aws
from autopilot.dal.spend import SpendTable
from autopilot.dal.state_table import StateTable
from autopilot.logic.spend_meter import run_spend_meter
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics
from autopilot.pricing import ListPrices
from autopilot.settings import spend_meter_settings
from aws_lambda_powertools.utilities.typing import LambdaContext


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The schedule's time is "now": a retried invocation carries the same time and adds nothing.
    scheduled = EventBridgeModel.model_validate(event)
    settings = spend_meter_settings()
    spend = SpendTable(settings.state_table_name)
    return run_spend_meter(
        scheduled.time,
        store=StateTable(settings.state_table_name),
        spend=spend,
        prices=ListPrices(settings.region, spend),
        sagemaker=aws.client("sagemaker"),
        sns=aws.client("sns"),
        alerts_topic_arn=settings.alerts_topic_arn,
    )
