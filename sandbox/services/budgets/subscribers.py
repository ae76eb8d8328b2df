"""The subscriber seam: DescribeSubscribersForNotification, CreateSubscriber and DeleteSubscriber,
which moto's BudgetsResponse does not have, served from moto's stored notifications.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from moto.budgets.exceptions import DuplicateRecordException, NotFoundException
from moto.budgets.models import Budget, BudgetsBackend, Notification
from moto.budgets.responses import BudgetsResponse

from sandbox.services.budgets.model import (
    MAX_EMAIL_SUBSCRIBERS,
    MAX_SNS_SUBSCRIBERS,
    CreationLimitExceededException,
    InvalidNextTokenException,
)
from sandbox.services.budgets.notifications import to_decimal
from sandbox.services.budgets.validation import validate_subscribers

SUBSCRIBER_OPERATIONS = ("DescribeSubscribersForNotification", "CreateSubscriber", "DeleteSubscriber")
_SUBSCRIBERS_PAGE = 100  # botocore's MaxResults maximum (a notification has at most 11 subscribers)
_MISSING = object()
_RESPONSE_ORIGINALS: dict[str, Any] = {}


def _notification_identity(notification: Mapping[str, Any]) -> tuple[Any, ...]:
    """What names a notification in the *Subscriber* requests (NotificationState is only reported)."""
    return (
        notification.get("NotificationType"),
        notification.get("ComparisonOperator"),
        to_decimal(notification.get("Threshold"), "Threshold"),
        notification.get("ThresholdType") or "PERCENTAGE",
    )


def _find_notification(
    backend: BudgetsBackend, account_id: str, budget_name: str, notification: Mapping[str, Any], action: str
) -> tuple[Budget, Notification]:
    budget = backend.budgets[account_id].get(budget_name)
    if budget is None:
        raise NotFoundException(f"Unable to {action} - the budget doesn't exist.")
    wanted = _notification_identity(notification)
    for stored in budget.notifications:
        if _notification_identity(stored.details) == wanted:
            return budget, stored
    raise NotFoundException(f"Unable to {action} - the notification doesn't exist.")


def _subscribers_of(notification: Notification) -> list[dict[str, Any]]:
    return list(cast(list[dict[str, Any]], notification.subscribers))


def _same_subscriber(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (a.get("SubscriptionType"), a.get("Address")) == (b.get("SubscriptionType"), b.get("Address"))


def describe_subscribers_for_notification(
    backend: BudgetsBackend,
    account_id: str,
    budget_name: str,
    notification: Mapping[str, Any],
    *,
    max_results: int | None = None,
    next_token: str | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the notification's subscribers and the token of the next (None on the last)."""
    _, stored = _find_notification(backend, account_id, budget_name, notification, "get subscribers")
    subscribers = _subscribers_of(stored)
    start = 0
    if next_token:
        if not next_token.isdigit() or int(next_token) >= len(subscribers):
            raise InvalidNextTokenException(f"Invalid NextToken: {next_token}")
        start = int(next_token)
    end = start + (max_results or _SUBSCRIBERS_PAGE)
    return subscribers[start:end], str(end) if end < len(subscribers) else None


def create_subscriber(
    backend: BudgetsBackend,
    account_id: str,
    budget_name: str,
    notification: Mapping[str, Any],
    subscriber: Mapping[str, Any],
) -> None:
    _, stored = _find_notification(backend, account_id, budget_name, notification, "create subscriber")
    subscribers = _subscribers_of(stored)
    if any(_same_subscriber(s, subscriber) for s in subscribers):
        raise DuplicateRecordException(record_type="subscriber", record_name=str(subscriber.get("Address")))
    validate_subscribers([subscriber])
    kind = subscriber.get("SubscriptionType")
    limit = MAX_SNS_SUBSCRIBERS if kind == "SNS" else MAX_EMAIL_SUBSCRIBERS
    if sum(s.get("SubscriptionType") == kind for s in subscribers) >= limit:
        raise CreationLimitExceededException(f"A notification can have at most {limit} {kind} subscriber(s)")
    # A new list, not an append: the simulator reads the subscribers while alerting.
    stored.subscribers = cast(Any, [*subscribers, dict(subscriber)])


def delete_subscriber(
    backend: BudgetsBackend,
    account_id: str,
    budget_name: str,
    notification: Mapping[str, Any],
    subscriber: Mapping[str, Any],
) -> None:
    """Remove one subscriber; removing the last one deletes the notification, as AWS does."""
    budget, stored = _find_notification(backend, account_id, budget_name, notification, "delete subscriber")
    subscribers = _subscribers_of(stored)
    remaining = [s for s in subscribers if not _same_subscriber(s, subscriber)]
    if len(remaining) == len(subscribers):
        raise NotFoundException("Unable to delete subscriber - the subscriber doesn't exist.")
    if remaining:
        stored.subscribers = cast(Any, remaining)
    else:
        budget.notifications = [n for n in budget.notifications if n is not stored]


def _named_notification(response: BudgetsResponse) -> tuple[BudgetsBackend, str, str, Mapping[str, Any]]:
    """The (backend, account, budget name, notification) a *Subscriber* request is about."""
    return (
        response.backend,
        response._get_param("AccountId"),
        response._get_param("BudgetName"),
        response._get_param("Notification"),
    )


def _serve_describe_subscribers_for_notification(response: BudgetsResponse) -> str:
    subscribers, next_token = describe_subscribers_for_notification(
        *_named_notification(response),
        max_results=response._get_int_param("MaxResults"),
        next_token=response._get_param("NextToken"),
    )
    body: dict[str, Any] = {"Subscribers": subscribers}
    if next_token is not None:
        body["NextToken"] = next_token
    return json.dumps(body)


def _serve_create_subscriber(response: BudgetsResponse) -> str:
    create_subscriber(*_named_notification(response), response._get_param("Subscriber"))
    return json.dumps({})


def _serve_delete_subscriber(response: BudgetsResponse) -> str:
    delete_subscriber(*_named_notification(response), response._get_param("Subscriber"))
    return json.dumps({})


_SUBSCRIBER_HANDLERS: dict[str, Callable[[BudgetsResponse], str]] = {
    "describe_subscribers_for_notification": _serve_describe_subscribers_for_notification,
    "create_subscriber": _serve_create_subscriber,
    "delete_subscriber": _serve_delete_subscriber,
}


def patch_moto_budgets_responses() -> None:
    """The subscriber seam: moto calls ``BudgetsResponse.<action in snake_case>()`` for a request
    (in-process and over HTTP alike); set one such method per *Subscriber* action. Where moto has
    its own (a newer moto), it is overridden and restored on uninstall;
    tests/sandbox/test_budgets_subscribers.py says which moto has."""
    if _RESPONSE_ORIGINALS:
        return
    for method, handler in _SUBSCRIBER_HANDLERS.items():
        _RESPONSE_ORIGINALS[method] = BudgetsResponse.__dict__.get(method, _MISSING)
        setattr(BudgetsResponse, method, handler)


def unpatch_moto_budgets_responses() -> None:
    for method, original in _RESPONSE_ORIGINALS.items():
        if original is _MISSING:
            delattr(BudgetsResponse, method)
        else:
            setattr(BudgetsResponse, method, original)
    _RESPONSE_ORIGINALS.clear()
