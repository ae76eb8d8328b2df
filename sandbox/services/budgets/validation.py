"""What AWS Budgets checks on CreateBudget / CreateNotification and moto does not, plus what the
simulator cannot simulate (refused loudly rather than ignored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moto.budgets.exceptions import BudgetMissingLimit
from moto.budgets.models import Budget

from sandbox.services.budgets.model import (
    MAX_EMAIL_SUBSCRIBERS,
    MAX_NOTIFICATIONS,
    MAX_SNS_SUBSCRIBERS,
    InvalidParameterException,
    budget_matcher,
)


def validate_subscribers(subscribers: Sequence[Mapping[str, Any]]) -> None:
    kinds = [s.get("SubscriptionType") for s in subscribers]
    if kinds.count("SNS") > MAX_SNS_SUBSCRIBERS:
        raise InvalidParameterException(
            f"A notification can have at most {MAX_SNS_SUBSCRIBERS} SNS subscriber"
        )
    if kinds.count("EMAIL") > MAX_EMAIL_SUBSCRIBERS:
        raise InvalidParameterException(
            f"A notification can have at most {MAX_EMAIL_SUBSCRIBERS} EMAIL subscribers"
        )
    for subscriber in subscribers:
        if subscriber.get("SubscriptionType") == "SNS" and not str(subscriber.get("Address", "")).startswith(
            "arn:"
        ):
            raise InvalidParameterException(
                f"SNS subscriber address must be a topic ARN: {subscriber.get('Address')}"
            )


def _validate_notification_against(budget: Mapping[str, Any], notification: Mapping[str, Any]) -> None:
    if notification.get("NotificationType") == "FORECASTED" and budget.get("TimeUnit") == "DAILY":
        raise InvalidParameterException("FORECASTED notifications are not supported for DAILY budgets")


def validate_budget(budget: Mapping[str, Any], notifications: Sequence[Mapping[str, Any]]) -> None:
    name = str(budget.get("BudgetName", ""))
    if ":" in name or "\\" in name or "/action/" in name:
        raise InvalidParameterException(
            f"Invalid budget name {name!r}: the ':' and '\\' characters and '/action/' are not allowed"
        )
    if budget.get("BudgetType") != "COST":
        raise InvalidParameterException(
            f"BudgetType {budget.get('BudgetType')!r} is not simulated by the sandbox Budgets simulator "
            "(COST only)"
        )
    if "BudgetLimit" not in budget and "PlannedBudgetLimits" not in budget:
        raise BudgetMissingLimit()
    if budget.get("TimeUnit") == "CUSTOM" and not (budget.get("TimePeriod") or {}).get("End"):
        raise InvalidParameterException("A CUSTOM budget needs a TimePeriod with Start and End")
    budget_matcher(budget)  # raises for filters the simulator cannot evaluate
    if len(notifications) > MAX_NOTIFICATIONS:
        raise InvalidParameterException(f"A budget can have at most {MAX_NOTIFICATIONS} notifications")
    for entry in notifications:
        _validate_notification_against(budget, entry["Notification"])
        validate_subscribers(entry["Subscribers"])


def validate_notification(
    budget: Budget | None, notification: Mapping[str, Any], subscribers: Sequence[Any]
) -> None:
    if budget is not None:
        if len(budget.notifications) >= MAX_NOTIFICATIONS:
            raise InvalidParameterException(f"A budget can have at most {MAX_NOTIFICATIONS} notifications")
        _validate_notification_against(budget.budget, notification)
    validate_subscribers(subscribers)
