"""What a budget alert says and where it may go: the delivery record, the alert's subject and
body as AWS words them, the budget's limit at a moment, and the SNS topic policy check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from moto.budgets.models import Budget

from sandbox.services.budgets.model import (
    AMOUNT_STEP,
    BUDGETS_PRINCIPAL,
    CENT,
    DASHBOARD_URL,
    InvalidParameterException,
    Matcher,
    budget_period,
    period_phrase,
)


@dataclass(frozen=True)
class BudgetDelivery:
    """One alert sent (or attempted) to one subscriber."""

    budget_name: str
    notification: dict[str, Any]  # the Notification as the API spells it
    subscription_type: str  # SNS | EMAIL
    address: str
    subject: str
    message: str
    sent_at: datetime
    delivered: bool
    error: str | None = None
    message_id: str | None = None  # SNS MessageId


@dataclass
class BudgetState:
    """The simulator's bookkeeping for one budget object in moto (dropped when it is deleted)."""

    budget: Budget
    matcher: Matcher
    actual_adjustment: dict[datetime, Decimal] = field(default_factory=dict)  # period start -> $
    forecast_adjustment: dict[datetime, Decimal] = field(default_factory=dict)
    alarms: set[str] = field(default_factory=set)  # notification keys in ALARM this period
    alarm_period: datetime | None = None


def notification_key(notification: Mapping[str, Any]) -> str:
    return json.dumps(notification, sort_keys=True, default=str)


def _money(amount: Decimal) -> str:
    return f"${amount.quantize(CENT):,.2f}"


def api_amount(amount: Decimal) -> str:
    text = format(amount.quantize(AMOUNT_STEP).normalize(), "f")
    return "0" if text in ("-0", "") else text


def to_decimal(value: Any, what: str) -> Decimal:
    try:
        return Decimal(str(value))
    except InvalidOperation:
        raise InvalidParameterException(f"{what} must be a number, not {value!r}") from None


def budget_message(
    *,
    budget: Mapping[str, Any],
    notification: Mapping[str, Any],
    threshold_amount: Decimal,
    value: Decimal,
    account_id: str,
    at: datetime,
) -> tuple[str, str]:
    """(subject, message) of the notification AWS Budgets sends to SNS / e-mail."""
    name = str(budget["BudgetName"])
    alert_type = str(notification["NotificationType"])
    comparison = {
        "GREATER_THAN": ("greater than", ">"),
        "LESS_THAN": ("less than", "<"),
        "EQUAL_TO": ("equal to", "="),
    }
    words, sign = comparison[str(notification["ComparisonOperator"])]
    unit = str(budget.get("TimeUnit", "MONTHLY"))
    if unit == "DAILY":
        status = f"Yesterday, the {alert_type} Cost associated with this budget is {_money(value)}."
    else:
        status = f"The {alert_type} Cost associated with this budget is {_money(value)}."
    limit = budget_limit(budget, at)
    message = (
        f"AWS Budget Notification {at.astimezone(UTC):%B %d, %Y}\n"
        f"AWS Account {account_id}\n"
        "\n"
        "Dear AWS Customer,\n"
        "\n"
        f"You requested that we alert you when the {alert_type} Cost associated with your {name} budget "
        f"is {words} {_money(threshold_amount)} {period_phrase(unit)}. {status} "
        "You can find additional details below and by accessing the AWS Budgets dashboard [1].\n"
        "\n"
        f"Budget Name: {name}\n"
        "Budget Type: Cost\n"
        f"Budgeted Amount: {_money(limit)}\n"
        f"Alert Type: {alert_type}\n"
        f"Alert Threshold: {sign} {_money(threshold_amount)}\n"
        f"{alert_type} Amount: {_money(value)}\n"
        "\n"
        f"[1] {DASHBOARD_URL}\n"
    )
    subject = f"AWS Budgets: {name} has exceeded your alert threshold"
    return subject[:100], message


def budget_limit(budget: Mapping[str, Any], at: datetime) -> Decimal:
    if budget.get("BudgetLimit"):
        return to_decimal(budget["BudgetLimit"]["Amount"], "BudgetLimit.Amount")
    planned = budget.get("PlannedBudgetLimits") or {}
    start, _ = budget_period(budget, at)
    spend = planned.get(str(int(start.timestamp())))
    if spend is None:
        raise InvalidParameterException(
            f"Budget {budget['BudgetName']} has no planned limit for {start:%Y-%m-%d}"
        )
    return to_decimal(spend["Amount"], "PlannedBudgetLimits.Amount")


def topic_allows_budgets(policy: Mapping[str, Any], topic_arn: str) -> bool:
    """Whether a topic policy lets budgets.amazonaws.com publish (Allow, no Deny). Conditions are
    honoured only in that a ``{"AWS": "*"}`` grant with a condition (moto's default policy, which
    AWS Budgets cannot use either) does not count."""

    def applies(statement: Mapping[str, Any]) -> bool:
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if not any(a.lower() in ("sns:publish", "sns:*", "*") for a in actions):
            return False
        resources = statement.get("Resource", "*")
        resources = [resources] if isinstance(resources, str) else resources
        if not any(r in ("*", topic_arn) for r in resources):
            return False
        principal = statement.get("Principal", {})
        if principal == "*":
            return "Condition" not in statement
        services = principal.get("Service", []) if isinstance(principal, Mapping) else []
        services = [services] if isinstance(services, str) else services
        if BUDGETS_PRINCIPAL in services:
            return True
        aws = principal.get("AWS", []) if isinstance(principal, Mapping) else []
        aws = [aws] if isinstance(aws, str) else aws
        return "*" in aws and "Condition" not in statement

    statements = policy.get("Statement", [])
    statements = [statements] if isinstance(statements, Mapping) else statements
    if any(s.get("Effect") == "Deny" and applies(s) for s in statements):
        return False
    return any(s.get("Effect") == "Allow" and applies(s) for s in statements)
