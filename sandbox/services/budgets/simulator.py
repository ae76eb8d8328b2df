"""``BudgetsSimulator``: spend accrued from the fleet on the sandbox clock, budgets evaluated at
AWS's refresh times, alerts delivered to SNS (and recorded for EMAIL subscribers).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from moto.budgets.models import Budget, BudgetsBackend, budgets_backends
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sns.exceptions import SNSNotFoundError
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets.model import (
    BUDGETS_PRINCIPAL,
    CENT,
    DEFAULT_REFRESH_HOURS,
    CostLine,
    budget_matcher,
    budget_period,
)
from sandbox.services.budgets.notifications import (
    BudgetDelivery,
    BudgetState,
    budget_limit,
    budget_message,
    notification_key,
    to_decimal,
    topic_allows_budgets,
)
from sandbox.services.budgets.seam import (
    INSTALLED,
    REGISTRY_LOCK,
    patch_moto_budgets_backend,
    unpatch_moto_budgets_backend,
    write_calculated_spend,
)
from sandbox.services.budgets.subscribers import patch_moto_budgets_responses, unpatch_moto_budgets_responses
from sandbox.services.budgets.validation import validate_budget, validate_notification
from sandbox.services.pricing.list_prices import DEFAULT_PRICES, price_per_hour
from sandbox.services.running_instances import RunningInstance


class BudgetsSimulator:
    """AWS Budgets for one account of the sandbox, fed by the simulated fleet.

    ``install()`` starts the spend clock and the CreateBudget validation; ``tick()`` accrues spend
    and sends the alerts due. :meth:`set_spend` forces a budget's spend (fault injection, quick
    crossings); :attr:`deliveries` lists every alert sent, SNS and EMAIL.
    """

    def __init__(
        self,
        clock: SandboxClock,
        fleet: Callable[[], list[RunningInstance]],
        region: str = "us-east-1",
        account_id: str = DEFAULT_ACCOUNT_ID,
        *,
        prices: Mapping[str, Decimal] = DEFAULT_PRICES,
        enforce_topic_policy: bool = True,
        refresh_hours: float = DEFAULT_REFRESH_HOURS,
        duplicate_deliveries: float = 0.0,
        seed: int | None = None,
    ) -> None:
        if not 0 < refresh_hours <= 24:
            raise ValueError("refresh_hours must be more than 0 and at most 24")
        if not 0.0 <= duplicate_deliveries <= 1.0:
            raise ValueError("duplicate_deliveries must be between 0 and 1")
        self.clock = clock
        self.fleet = fleet
        self.region = region
        self.account_id = account_id
        self.prices = prices
        self.enforce_topic_policy = enforce_topic_policy
        self.refresh_interval = timedelta(hours=refresh_hours)
        self.duplicate_deliveries = duplicate_deliveries  # share of SNS alerts published twice
        self._duplicates = random.Random(None if seed is None else f"{seed}/budget-duplicates")
        self.deliveries: list[BudgetDelivery] = []
        self._ledger: dict[CostLine, Decimal] = {}
        self._burn: dict[CostLine, Decimal] = {}  # the last sample: $/hour by (undated) cost line
        self._states: dict[str, BudgetState] = {}
        self._last_tick: datetime | None = None
        self._next_refresh: datetime | None = None
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------------
    def install(self) -> None:
        with REGISTRY_LOCK:
            other = INSTALLED.get(self.account_id)
            if other is not None and other is not self:
                raise RuntimeError(f"another BudgetsSimulator is installed for account {self.account_id}")
            INSTALLED[self.account_id] = self
            patch_moto_budgets_backend(validate_budget, validate_notification)
            patch_moto_budgets_responses()
        with self._lock:
            if self._last_tick is None:
                self._last_tick = self.clock.now()
                self._next_refresh = self._refresh_after(self._last_tick)

    def uninstall(self) -> None:
        with REGISTRY_LOCK:
            if INSTALLED.get(self.account_id) is self:
                del INSTALLED[self.account_id]
            if not INSTALLED:
                unpatch_moto_budgets_backend()
                unpatch_moto_budgets_responses()

    def __enter__(self) -> BudgetsSimulator:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- driving ---------------------------------------------------------------------------------
    def tick(self) -> list[BudgetDelivery]:
        """Charge the fleet for the simulated time since the last tick; when a refresh time has
        passed, evaluate the budgets (:meth:`refresh`). Returns the new deliveries."""
        now = self.clock.now()
        with self._lock:
            previous = self._last_tick if self._last_tick is not None else now
            due = self._next_refresh is None or now >= self._next_refresh
        if now == previous and not due:
            return []  # no simulated time passed (a frozen clock's ticker): nothing to charge
        burn = self._sample(now)
        with self._lock:
            if self._last_tick is not None and now < self._last_tick:
                return []  # another thread's tick (the ticker's, a driver's) charged up to a later time
            previous = self._last_tick if self._last_tick is not None else now
            self._last_tick = now
            self._burn = burn
            for start, end in _split_by_day(previous, now):
                hours = Decimal(str((end - start).total_seconds())) / Decimal(3600)
                for line, rate in burn.items():
                    dated = CostLine(
                        start.date(), line.account_id, line.region, line.instance_type, line.tags
                    )
                    self._ledger[dated] = self._ledger.get(dated, Decimal(0)) + rate * hours
            due = self._next_refresh is None or now >= self._next_refresh
            if due:
                self._next_refresh = self._refresh_after(now)
        return self._evaluate(now) if due else []

    def _resample(self, now: datetime) -> None:
        """The forecast's rate from the fleet now (a tick with no time passed does not sample it)."""
        burn = self._sample(now)
        with self._lock:
            self._burn = burn

    def _sample(self, now: datetime) -> dict[CostLine, Decimal]:
        """$/hour by (undated) cost line of the fleet running now. Instances are counted per (cluster,
        type, tag set) and each group priced once: a line built per instance made the ticks of a few
        2,000-node clusters the sandbox's largest cost (docs/fleet-sim.md, "Scale")."""
        counts: Counter[tuple[str, str, int]] = Counter()
        tags_of: dict[int, Mapping[str, str]] = {}  # by id() of each tag mapping, alive in the sample
        for instance in self.fleet():
            tags_of.setdefault(id(instance.tags), instance.tags)
            counts[(instance.cluster_arn, instance.instance_type, id(instance.tags))] += 1
        burn: dict[CostLine, Decimal] = {}
        for (cluster_arn, instance_type, tags_id), count in counts.items():
            line = self._line(cluster_arn, instance_type, tags_of[tags_id], now.date())
            if line.account_id == self.account_id:
                burn[line] = burn.get(line, Decimal(0)) + price_per_hour(instance_type, self.prices) * count
        return burn

    def refresh(self) -> list[BudgetDelivery]:
        """Evaluate every budget now, as an AWS Budgets data refresh does: rewrite CalculatedSpend and
        send the alerts that became due (tick does it on the refresh cadence)."""
        now = self.clock.now()
        self._resample(now)
        return self._evaluate(now)

    def _evaluate(self, now: datetime) -> list[BudgetDelivery]:
        """:meth:`refresh` with the fleet's rate already sampled (by the tick or the caller)."""
        pending: list[tuple[str, dict[str, Any], dict[str, Any], Decimal, Decimal, list[dict[str, Any]]]] = []
        with self._lock:
            for name, state in self._sync_states().items():
                budget = state.budget.budget
                actual, forecast = self._spend(state, now)
                write_calculated_spend(state.budget, actual, forecast)
                period_start, _ = budget_period(budget, now)
                if state.alarm_period != period_start:
                    state.alarms.clear()
                    state.alarm_period = period_start
                limit = budget_limit(budget, now)
                for notification_obj in state.budget.notifications:
                    notification = dict(notification_obj.details)
                    value = forecast if notification["NotificationType"] == "FORECASTED" else actual
                    threshold = to_decimal(notification["Threshold"], "Threshold")
                    if notification.get("ThresholdType", "PERCENTAGE") == "PERCENTAGE":
                        threshold = limit * threshold / Decimal(100)
                    key = notification_key(notification)
                    if not _compare(notification["ComparisonOperator"], value, threshold):
                        state.alarms.discard(key)
                        continue
                    if key in state.alarms:
                        continue
                    state.alarms.add(key)
                    subscribers = [dict(s) for s in cast(list[dict[str, Any]], notification_obj.subscribers)]
                    pending.append((name, dict(budget), notification, threshold, value, subscribers))
        # Outside the lock: SNS delivery may run a subscribed Lambda in this thread.
        sent: list[BudgetDelivery] = []
        for name, budget, notification, threshold, value, subscribers in pending:
            subject, message = budget_message(
                budget=budget,
                notification=notification,
                threshold_amount=threshold,
                value=value,
                account_id=self.account_id,
                at=now,
            )
            for subscriber in subscribers:
                copies = 1 + (subscriber["SubscriptionType"] == "SNS" and self._duplicate())
                sent += [
                    self._deliver(name, notification, subscriber, subject=subject, message=message, now=now)
                    for _ in range(copies)
                ]
        with self._lock:
            self.deliveries.extend(sent)
        return sent

    # -- scenario / admin API --------------------------------------------------------------------
    def set_spend(
        self, budget_name: str, actual: Decimal | float | str, forecasted: Decimal | float | str | None = None
    ) -> list[BudgetDelivery]:
        """Force the budget's current-period ActualSpend (and optionally ForecastedSpend) to these
        amounts now; later ticks keep adding to them. Refreshes at once (an admin shortcut, not
        AWS's cadence) and returns the alerts this makes due."""
        now = self.clock.now()
        self._resample(now)
        with self._lock:
            state = self._sync_states().get(budget_name)
            if state is None:
                raise KeyError(f"no budget {budget_name!r} in account {self.account_id}")
            start, _ = budget_period(state.budget.budget, now)
            state.actual_adjustment.pop(start, None)
            state.forecast_adjustment.pop(start, None)
            computed_actual, _ = self._spend(state, now)
            state.actual_adjustment[start] = to_decimal(actual, "actual") - computed_actual
            if forecasted is not None:
                _, forecast_now = self._spend(state, now)
                state.forecast_adjustment[start] = to_decimal(forecasted, "forecasted") - forecast_now
        return self._evaluate(now)

    def spend(self, budget_name: str) -> tuple[Decimal, Decimal]:
        """(ActualSpend, ForecastedSpend) of the budget now, unrounded."""
        self._resample(self.clock.now())
        with self._lock:
            state = self._sync_states().get(budget_name)
            if state is None:
                raise KeyError(f"no budget {budget_name!r} in account {self.account_id}")
            return self._spend(state, self.clock.now())

    def emails(self, address: str | None = None) -> list[BudgetDelivery]:
        """The EMAIL deliveries (to ``address`` if given): what the recipients would have received."""
        with self._lock:
            return [
                d
                for d in self.deliveries
                if d.subscription_type == "EMAIL" and (address is None or d.address == address)
            ]

    def reset(self) -> None:
        """Forget spend, alarms and deliveries (budgets themselves live in moto)."""
        with self._lock:
            self._ledger.clear()
            self._burn.clear()
            self._states.clear()
            self.deliveries.clear()
            self._last_tick = self.clock.now()
            self._next_refresh = self._refresh_after(self._last_tick)

    # -- internals -------------------------------------------------------------------------------
    def _duplicate(self) -> bool:
        return bool(self.duplicate_deliveries) and self._duplicates.random() < self.duplicate_deliveries

    def _refresh_after(self, moment: datetime) -> datetime:
        """The first refresh time after ``moment``: UTC midnight + k x refresh_interval, each day."""
        midnight = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        due = midnight
        while due <= moment and due < midnight + timedelta(days=1):
            due += self.refresh_interval
        return min(due, midnight + timedelta(days=1))

    def _line(self, cluster_arn: str, instance_type: str, tags: Mapping[str, str], day: date) -> CostLine:
        arn_parts = cluster_arn.split(":")
        region = arn_parts[3] if len(arn_parts) > 4 and arn_parts[3] else self.region
        account = arn_parts[4] if len(arn_parts) > 4 and arn_parts[4] else self.account_id
        return CostLine(day, account, region, instance_type, frozenset(tags.items()))

    def _budgets(self) -> dict[str, Budget]:
        backend: BudgetsBackend = budgets_backends[self.account_id][get_partition(self.region)]
        return dict(backend.budgets.get(self.account_id, {}))

    def _sync_states(self) -> dict[str, BudgetState]:
        """Follow moto: new budgets get a state, deleted (or re-created) ones lose theirs."""
        live = self._budgets()
        for name in list(self._states):
            if live.get(name) is not self._states[name].budget:
                del self._states[name]
        for name, budget in live.items():
            if name not in self._states and budget.budget.get("BudgetType") == "COST":
                self._states[name] = BudgetState(budget, budget_matcher(budget.budget))
        return self._states

    def _spend(self, state: BudgetState, now: datetime) -> tuple[Decimal, Decimal]:
        start, end = budget_period(state.budget.budget, now)
        actual = sum(
            (
                amount
                for line, amount in self._ledger.items()
                if start.date() <= line.day < end.date() and state.matcher(line)
            ),
            Decimal(0),
        )
        actual += state.actual_adjustment.get(start, Decimal(0))
        rate = sum((r for line, r in self._burn.items() if state.matcher(line)), Decimal(0))
        hours_left = Decimal(str(max((end - now).total_seconds(), 0.0))) / Decimal(3600)
        forecast = actual + rate * hours_left + state.forecast_adjustment.get(start, Decimal(0))
        return max(actual, Decimal(0)), max(forecast, Decimal(0))

    def _deliver(
        self,
        budget_name: str,
        notification: dict[str, Any],
        subscriber: Mapping[str, Any],
        *,
        subject: str,
        message: str,
        now: datetime,
    ) -> BudgetDelivery:
        kind, address = str(subscriber["SubscriptionType"]), str(subscriber["Address"])

        def record(
            delivered: bool, error: str | None = None, message_id: str | None = None
        ) -> BudgetDelivery:
            return BudgetDelivery(
                budget_name, notification, kind, address, subject, message, now, delivered, error, message_id
            )

        if kind != "SNS":
            return record(True)
        parts = address.split(":")
        if len(parts) != 6 or parts[2] != "sns":
            return record(False, f"not an SNS topic ARN: {address}")
        backend = sns_backends[parts[4]][parts[3]]
        try:
            topic = backend.get_topic(address)
        except SNSNotFoundError:
            return record(False, f"SNS topic {address} does not exist")
        if self.enforce_topic_policy and not topic_allows_budgets(topic._policy_json, address):
            return record(False, f"the policy of {address} does not allow {BUDGETS_PRINCIPAL} to SNS:Publish")
        message_id = backend.publish(message, arn=address, subject=subject)
        return record(True, message_id=message_id)


def _compare(operator: str, value: Decimal, threshold: Decimal) -> bool:
    if operator == "GREATER_THAN":
        return value > threshold
    if operator == "LESS_THAN":
        return value < threshold
    return value.quantize(CENT) == threshold.quantize(CENT)


def _split_by_day(start: datetime, end: datetime) -> Iterable[tuple[datetime, datetime]]:
    """[start, end) cut at UTC midnights, so each piece's cost lands on its own day."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    while start < end:
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        piece_end = min(midnight, end)
        yield start, piece_end
        start = piece_end
