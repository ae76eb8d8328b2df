"""The moto seam: moto's BudgetsBackend validates budgets and notifications before it stores them,
and shows the simulator's CalculatedSpend; the installed simulators, one per account.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from moto.budgets.models import Budget, BudgetsBackend

from sandbox.services.budgets.notifications import api_amount

if TYPE_CHECKING:
    from sandbox.services.budgets.simulator import BudgetsSimulator


INSTALLED: dict[str, BudgetsSimulator] = {}
REGISTRY_LOCK = threading.Lock()
_ORIGINALS: dict[str, Callable[..., Any]] = {}

_SEAM_SIGNATURES = {
    "create_budget": ["self", "account_id", "budget", "notifications"],
    "create_notification": ["self", "account_id", "budget_name", "notification", "subscribers"],
}

BudgetValidator = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], None]
NotificationValidator = Callable[[Budget | None, Mapping[str, Any], Sequence[Any]], None]


def write_calculated_spend(budget: Budget, actual: Decimal, forecast: Decimal) -> None:
    """Data seam: moto's ``Budget.to_dict`` returns ``budget.budget["CalculatedSpend"]`` when set."""
    budget.budget["CalculatedSpend"] = {
        "ActualSpend": {"Amount": api_amount(actual), "Unit": "USD"},
        "ForecastedSpend": {"Amount": api_amount(forecast), "Unit": "USD"},
    }


def patch_moto_budgets_backend(
    check_budget: BudgetValidator, check_notification: NotificationValidator
) -> None:
    """THE seam: wrap moto's ``BudgetsBackend.create_budget(account_id, budget, notifications)`` and
    ``create_notification(account_id, budget_name, notification, subscribers)`` so requests are
    validated before moto stores them (moto raises its ``JsonRESTError`` subclasses the same way).
    Guarded by tests/sandbox/test_budgets_spend.py."""
    if _ORIGINALS:
        return
    for method, expected in _SEAM_SIGNATURES.items():
        actual = list(inspect.signature(getattr(BudgetsBackend, method)).parameters)
        if actual != expected:
            raise RuntimeError(
                f"moto's BudgetsBackend.{method} has parameters {actual}, expected {expected}: "
                "the budgets seam has moved; revisit sandbox/services/budgets/seam.py"
            )
    create_budget = BudgetsBackend.create_budget
    create_notification = BudgetsBackend.create_notification

    @functools.wraps(create_budget)
    def checked_create_budget(
        self: BudgetsBackend, account_id: str, budget: dict[str, Any], notifications: list[dict[str, Any]]
    ) -> None:
        check_budget(budget, notifications or [])
        create_budget(self, account_id=account_id, budget=budget, notifications=notifications)

    @functools.wraps(create_notification)
    def checked_create_notification(
        self: BudgetsBackend,
        account_id: str,
        budget_name: str,
        notification: dict[str, Any],
        subscribers: dict[str, Any],
    ) -> None:
        check_notification(self.budgets[account_id].get(budget_name), notification, list(subscribers or []))
        create_notification(
            self,
            account_id=account_id,
            budget_name=budget_name,
            notification=notification,
            subscribers=subscribers,
        )

    _ORIGINALS["create_budget"] = create_budget
    _ORIGINALS["create_notification"] = create_notification
    BudgetsBackend.create_budget = checked_create_budget  # type: ignore[method-assign]
    BudgetsBackend.create_notification = checked_create_notification  # type: ignore[method-assign]


def unpatch_moto_budgets_backend() -> None:
    for name, original in _ORIGINALS.items():
        setattr(BudgetsBackend, name, original)
    _ORIGINALS.clear()
