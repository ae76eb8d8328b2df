"""SpendMeterFunction: on a schedule (SpendMeterMinutes), each ACTIVE cluster's hourly rate,
month-to-date spend and forecast at list prices; alerts when the forecast reaches the budget
(autopilot.logic.spend_meter)."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from autopilot import aws
from autopilot.dal.spend import SpendTable
from autopilot.dal.state_table import StateTable
from autopilot.logic.spend_meter import run_spend_meter
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics
from autopilot.pricing import ListPrices
from autopilot.settings import spend_meter_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient


class Deps(NamedTuple):
    store: StateTable
    spend: SpendTable
    prices: ListPrices
    sagemaker: SageMakerClient
    sns: SNSClient
    alerts_topic_arn: str


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    settings = spend_meter_settings()
    spend = SpendTable(settings.state_table_name)
    return Deps(
        store=StateTable(settings.state_table_name),
        spend=spend,
        prices=ListPrices(settings.region, spend),
        sagemaker=aws.client("sagemaker"),
        sns=aws.client("sns"),
        alerts_topic_arn=settings.alerts_topic_arn,
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The schedule's time is "now": a retried invocation carries the same time and adds nothing.
    scheduled = EventBridgeModel.model_validate(event)
    found = deps()
    return run_spend_meter(
        scheduled.time,
        store=found.store,
        spend=found.spend,
        prices=found.prices,
        sagemaker=found.sagemaker,
        sns=found.sns,
        alerts_topic_arn=found.alerts_topic_arn,
    )
