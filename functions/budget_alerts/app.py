"""BudgetAlertsFunction: AWS Budgets' SNS notification (BudgetNotificationsTopic) → one enriched alert on
the alerts topic per (budget, threshold, period), and the cluster's budget enforcement at 100 % ACTUAL
(autopilot.logic.budget_alerts); every few minutes (a schedule) what a failure left undone
(autopilot.logic.budget_alert_retry)."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from autopilot import aws, clock
from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.dal.spend import SpendTable
from autopilot.dal.state_table import StateTable
from autopilot.logic.budget_alert_retry import retry_unfinished
from autopilot.logic.budget_alerts import (
    BudgetAlertDeps,
    Handled,
    handle_notification,
    spend_meter_rate,
)
from autopilot.models.envelopes import SnsModel
from autopilot.observability import Count, count, logger, metrics
from autopilot.settings import budget_alerts_settings
from aws_lambda_powertools.utilities.typing import LambdaContext


def _now() -> datetime:
    return clock.now()


@cache
def deps() -> BudgetAlertDeps:
    """Built on the first invocation, once per execution environment."""
    settings = budget_alerts_settings()
    return BudgetAlertDeps(
        settings=settings,
        store=StateTable(settings.state_table_name),
        alerts=BudgetAlertTable(settings.state_table_name),
        budgets=aws.client("budgets"),
        sagemaker=aws.client("sagemaker"),
        sns=aws.client("sns"),
        events=aws.client("events"),
        hourly_rate=spend_meter_rate(SpendTable(settings.state_table_name)),
        now=_now,
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("source") == "aws.events":  # the RetryUnfinished schedule
        return {"retried": retry_unfinished(deps())}
    records = SnsModel.model_validate(event).Records
    # Budgets' message is plain text (never JSON), so the parser leaves it a string.
    handled = [
        handle_notification(str(record.Sns.Message), record.Sns.Subject, deps()).value for record in records
    ]
    count(Count.BUDGET_ALERTS_FIRED, handled.count(Handled.PUBLISHED.value))
    return {"handled": handled}
