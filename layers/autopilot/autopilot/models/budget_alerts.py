"""AWS Budgets' SNS notification as Autopilot reads it, and the alert Autopilot publishes instead.

AWS Budgets sends a plain-text message (no JSON), the same text as its e-mail, e.g. (real deliveries
captured in public test fixtures; events/budgets/ holds one)::

    AWS Budget Notification September 26, 2022
    AWS Account 017790921725

    Dear AWS Customer,

    You requested that we alert you when the ACTUAL Cost associated with your Test Budget budget is
    greater than $0.16 for the current month. The ACTUAL Cost associated with this budget is $0.59. ...

    Budget Name: Test Budget
    Budget Type: Cost
    Budgeted Amount: $0.20
    Alert Type: ACTUAL
    Alert Threshold: > $0.16
    ACTUAL Amount: $0.59

    [1] https://console.aws.amazon.com/billing/home#/budgets

The parser reads the ``Key: value`` lines only (the prose around them has changed wording over the
years; the link changed to the Cost Management console in 2026). A PERCENTAGE threshold is stated in
dollars (80 % of $0.20 is "> $0.16"), so the percentage is derived from the budgeted amount. Amounts
may carry thousands separators ("$1,234.50") or no cents ("$100").
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from autopilot.models.values import BudgetEnforcement


class NotABudgetNotificationError(ValueError):
    """The SNS message is not AWS Budgets' notification (or not one of a cost budget)."""


_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):[ \t]*(?P<value>.*?)[ \t]*$", re.MULTILINE)
_HEADER_DATE = re.compile(r"AWS Budget Notification (?P<date>[A-Z][a-z]+ \d{1,2}, \d{4})")
_ACCOUNT = re.compile(r"AWS Account (?P<account>\d{12})")
_THRESHOLD = re.compile(r"^(?P<sign>[<>=])\s*(?P<amount>.+)$")


class BudgetNotification(BaseModel):
    """What one AWS Budgets notification says."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    budget_name: str
    alert_type: Literal["ACTUAL", "FORECASTED"]
    comparison: Literal["GREATER_THAN", "LESS_THAN", "EQUAL_TO"]
    threshold_usd: Decimal
    budgeted_usd: Decimal
    # The ACTUAL (or FORECASTED) amount as Budgets stated it when it sent the notification.
    amount_usd: Decimal
    notified_on: date | None = None
    account_id: str | None = None

    @property
    def threshold_percent(self) -> Decimal | None:
        """The threshold as a share of the budget (80 for "> $2,000.00" of $2,500.00); Budgets rounds
        the dollar threshold to cents, so this rounds to a hundredth of a percent."""
        if self.budgeted_usd == 0:
            return None
        return _plain(self.threshold_usd * 100 / self.budgeted_usd, Decimal("0.01"))


def _plain(value: Decimal, step: Decimal) -> Decimal:
    """``value`` rounded to ``step``, without trailing zeros or an exponent (80, 80.5)."""
    rounded = value.quantize(step).normalize()
    return rounded.quantize(Decimal(1)) if rounded == rounded.to_integral_value() else rounded


def parse_amount(text: str) -> Decimal:
    """ "$1,234.50" / "$100" / "1234.5 USD" -> Decimal."""
    cleaned = text.strip().removeprefix("$").replace(",", "").removesuffix("USD").strip()
    try:
        amount = Decimal(cleaned)
    except InvalidOperation:
        raise NotABudgetNotificationError(f"not an amount: {text!r}") from None
    if not amount.is_finite():
        raise NotABudgetNotificationError(f"not an amount: {text!r}")
    return amount


def parse_budget_notification(message: str) -> BudgetNotification:
    """Read an AWS Budgets SNS message; NotABudgetNotificationError names what is missing."""
    text = message.replace("\r\n", "\n")
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match["key"].strip().lower(), match["value"])
    missing = [
        key
        for key in ("budget name", "budgeted amount", "alert type", "alert threshold")
        if not fields.get(key)
    ]
    if missing:
        raise NotABudgetNotificationError(f"no {', '.join(missing)} in the message")
    alert_type = fields["alert type"].upper()
    if alert_type not in ("ACTUAL", "FORECASTED"):
        raise NotABudgetNotificationError(f"alert type {fields['alert type']!r} is not ACTUAL or FORECASTED")
    amount = fields.get(f"{alert_type.lower()} amount")
    if not amount:
        raise NotABudgetNotificationError(f"no '{alert_type} Amount' in the message")
    threshold = _THRESHOLD.match(fields["alert threshold"])
    if threshold is None:
        raise NotABudgetNotificationError(f"alert threshold {fields['alert threshold']!r} has no comparison")
    header = _HEADER_DATE.search(text)
    account = _ACCOUNT.search(text)
    return BudgetNotification(
        budget_name=fields["budget name"],
        alert_type="ACTUAL" if alert_type == "ACTUAL" else "FORECASTED",
        comparison=_comparison(threshold["sign"]),
        threshold_usd=parse_amount(threshold["amount"]),
        budgeted_usd=parse_amount(fields["budgeted amount"]),
        amount_usd=parse_amount(amount),
        notified_on=_header_date(header["date"]) if header else None,
        account_id=account["account"] if account else None,
    )


def _comparison(sign: str) -> Literal["GREATER_THAN", "LESS_THAN", "EQUAL_TO"]:
    if sign == ">":
        return "GREATER_THAN"
    if sign == "<":
        return "LESS_THAN"
    return "EQUAL_TO"


def _header_date(text: str) -> date | None:
    try:
        return datetime.strptime(text, "%B %d, %Y").replace(tzinfo=UTC).date()
    except ValueError:
        return None  # a month name in another language: the period falls back to the delivery time


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class EnforcementOutcome(_Camel):
    """What the enforcement did when this alert crossed 100 % ACTUAL."""

    mode: BudgetEnforcement
    # done | already-done | skipped | failed
    result: str
    message: str
    operation_id: str | None = None
    # scale-to-min: group -> [target count before, target count asked]
    instance_counts: dict[str, list[int]] | None = None
    growth_blocked_until: str | None = None


class BudgetAlert(_Camel):
    """The one alert Autopilot publishes on the alerts topic per (budget, threshold, period)."""

    kind: Literal["BudgetThresholdCrossed"] = "BudgetThresholdCrossed"
    summary: str
    budget_name: str
    cluster_name: str | None
    owner: str | None
    project: str | None
    alert_type: Literal["ACTUAL", "FORECASTED"]
    threshold_percent: Decimal | None
    threshold_usd: Decimal
    budget_usd: Decimal
    # Budgets' own figures: what the notification stated, and DescribeBudget's at the time of the alert.
    notified_amount_usd: Decimal
    actual_usd: Decimal | None
    forecast_usd: Decimal | None
    hourly_rate_usd: Decimal | None
    hourly_rate_source: str | None
    period: str
    cluster_url: str | None
    budget_console_url: str
    enforcement: EnforcementOutcome | None = None


__all__ = [
    "BudgetAlert",
    "BudgetEnforcement",
    "BudgetNotification",
    "EnforcementOutcome",
    "NotABudgetNotificationError",
    "parse_amount",
    "parse_budget_notification",
]
