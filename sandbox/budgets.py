"""AWS Budgets simulator: spend accrues from the simulated HyperPod fleet and alerts go out via SNS.

moto's budgets backend already stores budgets and their notifications (CreateBudget with
NotificationsWithSubscribers, DescribeBudget(s), DeleteBudget, Create/DeleteNotification,
DescribeNotificationsForBudget) and returns whatever ``CalculatedSpend`` the stored budget holds.
It computes no spend and sends no alerts; that is this module:

- AWS Budgets is a global service: one per account (botocore's endpoint rules send every client,
  whatever its region, to budgets.amazonaws.com signed for us-east-1; moto keeps one backend per
  account), and its spend covers the account's clusters in every region: ``fleet`` is the whole
  account's fleet (the Sandbox passes every region's HyperPod simulator); instances of other
  accounts are not charged here.
- :meth:`BudgetsSimulator.tick` charges every running instance ``price/hour x simulated hours``
  since the previous tick (the fleet is sampled at the tick) into a per-day cost ledger, keyed by
  region, instance type and the cluster's tags (cost allocation tags, ``user:`` prefixed in
  filters). A budget's ActualSpend is the ledger within its current period (calendar month /
  quarter / year / day on the sandbox clock, or the CUSTOM TimePeriod) that matches its
  ``CostFilters`` or ``FilterExpression``, so a budget created mid-month sees the month's spend,
  as AWS does. ForecastedSpend = actual + the current burn rate x the hours left in the period.
- AWS Budgets refreshes its data up to three times a day, so budgets are *evaluated* (their
  CalculatedSpend rewritten, their alerts sent) only on that cadence: at UTC midnight and every
  ``refresh_hours`` (default 8) after it, at the first tick past each such time. In between,
  DescribeBudget shows the spend of the last refresh, as on AWS. The exact times of AWS's
  refreshes are not documented (unverified).
- Each notification (ACTUAL | FORECASTED; GREATER_THAN | LESS_THAN | EQUAL_TO; PERCENTAGE |
  ABSOLUTE_VALUE) alerts once when its condition becomes true (OK -> ALARM) and again only after
  it was false or a new period began. The SNS subscriber's topic receives the plain-text message
  AWS Budgets sends (format below) through moto's SNS, so the topic's subscriptions (SQS, the
  sandbox Lambda runtime) get it; the topic policy must allow ``budgets.amazonaws.com`` to
  ``SNS:Publish``, as in AWS, or the delivery is recorded as failed. EMAIL subscribers are only
  recorded (:attr:`BudgetsSimulator.deliveries`).
- ``duplicate_deliveries`` (a share, 0 to 1; seeded by ``seed``) publishes that share of SNS alerts
  twice, each with its own MessageId, as AWS Budgets does now and then (the same crossing notified
  twice); subscribers must alert once anyway.
- :func:`_patch_moto_budgets_backend` (the seam) validates CreateBudget / CreateNotification
  where moto does not: subscriber limits, FORECASTED on a DAILY budget, and anything the
  simulator could not attribute spend for (a non-COST budget, a filter dimension it does not
  know) is rejected loudly instead of silently showing $0.
- :func:`_patch_moto_budgets_responses` (the subscriber seam) serves what moto's
  ``BudgetsResponse`` lacks: DescribeSubscribersForNotification, CreateSubscriber and
  DeleteSubscriber, over the subscribers moto stores with each notification (which the alerts
  are sent to, so a subscriber added or deleted changes who is alerted).

The message body follows real AWS Budgets SNS deliveries (captured in public test fixtures)::

    AWS Budget Notification September 26, 2022
    AWS Account 017790921725

    Dear AWS Customer,

    You requested that we alert you when the ACTUAL Cost associated with your Test Budget budget is
    greater than $0.16 for the current month. The ACTUAL Cost associated with this budget is $0.59.
    You can find additional details below and by accessing the AWS Budgets dashboard [1].

    Budget Name: Test Budget
    Budget Type: Cost
    Budgeted Amount: $0.20
    Alert Type: ACTUAL
    Alert Threshold: > $0.16
    ACTUAL Amount: $0.59

    [1] https://console.aws.amazon.com/billing/home#/budgets

(the "You requested" paragraph is one line). Deliveries captured since (January 2026) link the
Cost Management console instead, ``[1] https://console.aws.amazon.com/costmanagement/home#/budgets``,
and so does the simulator. A PERCENTAGE threshold is stated in dollars (80% of
$0.20 -> "$0.16"), as AWS does. Amounts use two decimals with thousands separators ("$1,234.50").
Subject: ``AWS Budgets: <name> has exceeded your alert threshold`` (cut to SNS's 100 characters).
"""

from __future__ import annotations

import functools
import inspect
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, cast

from moto.budgets.exceptions import BudgetMissingLimit, DuplicateRecordException, NotFoundException
from moto.budgets.models import Budget, BudgetsBackend, Notification, budgets_backends
from moto.budgets.responses import BudgetsResponse
from moto.core.exceptions import JsonRESTError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.sns.exceptions import SNSNotFoundError
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition

from sandbox.clock import SandboxClock
from sandbox.fleet import RunningInstance
from sandbox.prices import DEFAULT_PRICES, price_per_hour

SERVICE_NAME = "Amazon SageMaker"
SERVICE_CODE = "AmazonSageMaker"
MAX_NOTIFICATIONS = 10  # botocore's NotificationWithSubscribersList max
MAX_SNS_SUBSCRIBERS = 1
MAX_EMAIL_SUBSCRIBERS = 10
BUDGETS_PRINCIPAL = "budgets.amazonaws.com"
DASHBOARD_URL = "https://console.aws.amazon.com/costmanagement/home#/budgets"
DEFAULT_REFRESH_HOURS = 8.0  # AWS Budgets: "up to three times a day"

# legacy CostFilters key -> the dimension it filters on (those the simulator can evaluate)
COST_FILTER_KEYS = {
    "Service": "SERVICE",
    "Region": "REGION",
    "LinkedAccount": "LINKED_ACCOUNT",
    "InstanceType": "INSTANCE_TYPE",
    "TagKeyValue": "TAG",
}
EXPRESSION_DIMENSIONS = frozenset({"SERVICE", "SERVICE_CODE", "REGION", "LINKED_ACCOUNT", "INSTANCE_TYPE"})
MATCH_OPTIONS = frozenset(
    {"EQUALS", "ABSENT", "STARTS_WITH", "ENDS_WITH", "CONTAINS", "CASE_SENSITIVE", "CASE_INSENSITIVE"}
)
_CENT = Decimal("0.01")
_AMOUNT_STEP = Decimal("0.000001")


class InvalidParameterException(JsonRESTError):
    """Budgets' client error, serialized by moto like its own budgets exceptions."""

    code = 400

    def __init__(self, message: str) -> None:
        super().__init__("InvalidParameterException", message)


class CreationLimitExceededException(JsonRESTError):
    code = 400

    def __init__(self, message: str) -> None:
        super().__init__("CreationLimitExceededException", message)


class InvalidNextTokenException(JsonRESTError):
    code = 400

    def __init__(self, message: str) -> None:
        super().__init__("InvalidNextTokenException", message)


# -- the cost ledger -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CostLine:
    """What one ledger entry's cost is attributed to (one day, one kind of instance, one tag set)."""

    day: date
    account_id: str
    region: str
    instance_type: str
    tags: frozenset[tuple[str, str]]

    def dimension(self, name: str) -> str:
        return {
            "SERVICE": SERVICE_NAME,
            "SERVICE_CODE": SERVICE_CODE,
            "REGION": self.region,
            "LINKED_ACCOUNT": self.account_id,
            "INSTANCE_TYPE": self.instance_type,
        }[name]


Matcher = Callable[[CostLine], bool]


def _split_tag_key_value(raw: str) -> tuple[str, str]:
    """``user:ClusterName$demo`` -> (ClusterName, demo); ``user:ClusterName$`` -> (ClusterName, "")."""
    key, sep, value = raw.partition("$")
    if not sep or not key:
        raise InvalidParameterException(
            f"Invalid TagKeyValue cost filter {raw!r}: expected 'user:<tag key>$<tag value>'"
        )
    return key.removeprefix("user:"), value


def _cost_filters_matcher(cost_filters: Mapping[str, Sequence[str]]) -> Matcher:
    """Legacy CostFilters: AND across keys, OR within a key's values."""
    clauses: list[Matcher] = []
    for key, values in cost_filters.items():
        dimension = COST_FILTER_KEYS.get(key)
        if dimension is None:
            raise InvalidParameterException(
                f"Cost filter {key!r} is not simulated by the sandbox Budgets simulator "
                f"(supported: {', '.join(COST_FILTER_KEYS)})"
            )
        if not values:
            raise InvalidParameterException(f"Cost filter {key!r} has no values")
        if dimension == "TAG":
            clauses.append(_tag_clause([_split_tag_key_value(v) for v in values]))
        else:
            clauses.append(_dimension_clause(dimension, frozenset(values)))
    return lambda line: all(clause(line) for clause in clauses)


def _tag_clause(pairs: Sequence[tuple[str, str]]) -> Matcher:
    # "user:Key$" (empty value) is how AWS selects the untagged: a missing tag reads as ""
    return lambda line: any(dict(line.tags).get(k, "") == v for k, v in pairs)


def _dimension_clause(dimension: str, wanted: frozenset[str]) -> Matcher:
    return lambda line: line.dimension(dimension) in wanted


def _value_matcher(values: Sequence[str], options: Sequence[str]) -> Callable[[str | None], bool]:
    unknown = set(options) - MATCH_OPTIONS
    if unknown:
        raise InvalidParameterException(
            f"MatchOptions {sorted(unknown)} are not simulated by the sandbox Budgets simulator"
        )
    if "ABSENT" in options:
        return lambda actual: actual is None
    fold = "CASE_INSENSITIVE" in options

    def norm(text: str) -> str:
        return text.lower() if fold else text

    wanted = [norm(v) for v in values]
    if "STARTS_WITH" in options:
        return lambda actual: actual is not None and any(norm(actual).startswith(w) for w in wanted)
    if "ENDS_WITH" in options:
        return lambda actual: actual is not None and any(norm(actual).endswith(w) for w in wanted)
    if "CONTAINS" in options:
        return lambda actual: actual is not None and any(w in norm(actual) for w in wanted)
    return lambda actual: actual is not None and norm(actual) in wanted


def _expression_matcher(expression: Mapping[str, Any]) -> Matcher:
    """FilterExpression (Cost Explorer's Expression): exactly one of And / Or / Not / Dimensions / Tags."""
    present = [k for k, v in expression.items() if v not in (None, [], {})]
    if len(present) != 1:
        raise InvalidParameterException(
            f"A FilterExpression node must have exactly one of And, Or, Not, Dimensions, Tags; got {present}"
        )
    kind = present[0]
    if kind in ("And", "Or"):
        parts = [_expression_matcher(e) for e in expression[kind]]
        if kind == "And":
            return lambda line: all(p(line) for p in parts)
        return lambda line: any(p(line) for p in parts)
    if kind == "Not":
        inner = _expression_matcher(expression["Not"])
        return lambda line: not inner(line)
    if kind == "Dimensions":
        dims = expression["Dimensions"]
        dimension = dims.get("Key")
        if dimension not in EXPRESSION_DIMENSIONS:
            raise InvalidParameterException(
                f"Dimension {dimension!r} is not simulated by the sandbox Budgets simulator "
                f"(supported: {', '.join(sorted(EXPRESSION_DIMENSIONS))})"
            )
        check = _value_matcher(dims.get("Values") or [], dims.get("MatchOptions") or [])
        return lambda line: check(line.dimension(dimension))
    if kind == "Tags":
        tags = expression["Tags"]
        tag_key = str(tags.get("Key") or "").removeprefix("user:")
        if not tag_key:
            raise InvalidParameterException("A Tags filter needs a Key")
        check = _value_matcher(tags.get("Values") or [], tags.get("MatchOptions") or [])
        return lambda line: check(dict(line.tags).get(tag_key))
    raise InvalidParameterException(f"{kind} filters are not simulated by the sandbox Budgets simulator")


def budget_matcher(budget: Mapping[str, Any]) -> Matcher:
    """Which cost lines a budget counts; raises InvalidParameterException for filters the simulator
    cannot evaluate. No filter = the whole account."""
    cost_filters = budget.get("CostFilters") or {}
    expression = budget.get("FilterExpression") or {}
    if cost_filters and expression:
        raise InvalidParameterException("A budget can use CostFilters or FilterExpression, not both")
    if expression:
        return _expression_matcher(expression)
    if cost_filters:
        return _cost_filters_matcher(cost_filters)
    return lambda line: True


# -- periods -------------------------------------------------------------------------------------
def budget_period(budget: Mapping[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the budget period containing ``now`` (UTC calendar periods, or CUSTOM)."""
    now = now.astimezone(UTC)
    unit = budget.get("TimeUnit", "MONTHLY")
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "DAILY":
        return day, day + timedelta(days=1)
    if unit == "MONTHLY":
        start = day.replace(day=1)
        return start, _add_months(start, 1)
    if unit == "QUARTERLY":
        start = day.replace(day=1, month=(now.month - 1) // 3 * 3 + 1)
        return start, _add_months(start, 3)
    if unit == "ANNUALLY":
        start = day.replace(day=1, month=1)
        return start, start.replace(year=start.year + 1)
    if unit == "CUSTOM":
        period = budget.get("TimePeriod") or {}
        return _as_datetime(period["Start"]), _as_datetime(period["End"])
    raise InvalidParameterException(f"Unknown TimeUnit {unit!r}")


def _add_months(start: datetime, months: int) -> datetime:
    month_index = start.month - 1 + months
    return start.replace(year=start.year + month_index // 12, month=month_index % 12 + 1)


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value), UTC)


def _period_phrase(unit: str) -> str:
    return {
        "DAILY": "per day",
        "MONTHLY": "for the current month",
        "QUARTERLY": "for the current quarter",
        "ANNUALLY": "for the current year",
    }.get(unit, "for the current budget period")


# -- notifications -------------------------------------------------------------------------------
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
class _BudgetState:
    """The simulator's bookkeeping for one budget object in moto (dropped when it is deleted)."""

    budget: Budget
    matcher: Matcher
    actual_adjustment: dict[datetime, Decimal] = field(default_factory=dict)  # period start -> $
    forecast_adjustment: dict[datetime, Decimal] = field(default_factory=dict)
    alarms: set[str] = field(default_factory=set)  # notification keys in ALARM this period
    alarm_period: datetime | None = None


def _notification_key(notification: Mapping[str, Any]) -> str:
    return json.dumps(notification, sort_keys=True, default=str)


def _money(amount: Decimal) -> str:
    return f"${amount.quantize(_CENT):,.2f}"


def _api_amount(amount: Decimal) -> str:
    text = format(amount.quantize(_AMOUNT_STEP).normalize(), "f")
    return "0" if text in ("-0", "") else text


def _to_decimal(value: Any, what: str) -> Decimal:
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
    limit = _budget_limit(budget, at)
    message = (
        f"AWS Budget Notification {at.astimezone(UTC):%B %d, %Y}\n"
        f"AWS Account {account_id}\n"
        "\n"
        "Dear AWS Customer,\n"
        "\n"
        f"You requested that we alert you when the {alert_type} Cost associated with your {name} budget "
        f"is {words} {_money(threshold_amount)} {_period_phrase(unit)}. {status} "
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


def _budget_limit(budget: Mapping[str, Any], at: datetime) -> Decimal:
    if budget.get("BudgetLimit"):
        return _to_decimal(budget["BudgetLimit"]["Amount"], "BudgetLimit.Amount")
    planned = budget.get("PlannedBudgetLimits") or {}
    start, _ = budget_period(budget, at)
    spend = planned.get(str(int(start.timestamp())))
    if spend is None:
        raise InvalidParameterException(
            f"Budget {budget['BudgetName']} has no planned limit for {start:%Y-%m-%d}"
        )
    return _to_decimal(spend["Amount"], "PlannedBudgetLimits.Amount")


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


# -- the simulator -------------------------------------------------------------------------------
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
        self._states: dict[str, _BudgetState] = {}
        self._last_tick: datetime | None = None
        self._next_refresh: datetime | None = None
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------------
    def install(self) -> None:
        with _REGISTRY_LOCK:
            other = _INSTALLED.get(self.account_id)
            if other is not None and other is not self:
                raise RuntimeError(f"another BudgetsSimulator is installed for account {self.account_id}")
            _INSTALLED[self.account_id] = self
            _patch_moto_budgets_backend(_validate_budget, _validate_notification)
            _patch_moto_budgets_responses()
        with self._lock:
            if self._last_tick is None:
                self._last_tick = self.clock.now()
                self._next_refresh = self._refresh_after(self._last_tick)

    def uninstall(self) -> None:
        with _REGISTRY_LOCK:
            if _INSTALLED.get(self.account_id) is self:
                del _INSTALLED[self.account_id]
            if not _INSTALLED:
                _unpatch_moto_budgets_backend()
                _unpatch_moto_budgets_responses()

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
                _write_calculated_spend(state.budget, actual, forecast)
                period_start, _ = budget_period(budget, now)
                if state.alarm_period != period_start:
                    state.alarms.clear()
                    state.alarm_period = period_start
                limit = _budget_limit(budget, now)
                for notification_obj in state.budget.notifications:
                    notification = dict(notification_obj.details)
                    value = forecast if notification["NotificationType"] == "FORECASTED" else actual
                    threshold = _to_decimal(notification["Threshold"], "Threshold")
                    if notification.get("ThresholdType", "PERCENTAGE") == "PERCENTAGE":
                        threshold = limit * threshold / Decimal(100)
                    key = _notification_key(notification)
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
            state.actual_adjustment[start] = _to_decimal(actual, "actual") - computed_actual
            if forecasted is not None:
                _, forecast_now = self._spend(state, now)
                state.forecast_adjustment[start] = _to_decimal(forecasted, "forecasted") - forecast_now
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

    def _sync_states(self) -> dict[str, _BudgetState]:
        """Follow moto: new budgets get a state, deleted (or re-created) ones lose theirs."""
        live = self._budgets()
        for name in list(self._states):
            if live.get(name) is not self._states[name].budget:
                del self._states[name]
        for name, budget in live.items():
            if name not in self._states and budget.budget.get("BudgetType") == "COST":
                self._states[name] = _BudgetState(budget, budget_matcher(budget.budget))
        return self._states

    def _spend(self, state: _BudgetState, now: datetime) -> tuple[Decimal, Decimal]:
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
    return value.quantize(_CENT) == threshold.quantize(_CENT)


def _split_by_day(start: datetime, end: datetime) -> Iterable[tuple[datetime, datetime]]:
    """[start, end) cut at UTC midnights, so each piece's cost lands on its own day."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    while start < end:
        midnight = start.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        piece_end = min(midnight, end)
        yield start, piece_end
        start = piece_end


# -- validation (what AWS checks and moto does not, plus what the simulator cannot simulate) ------
def _validate_subscribers(subscribers: Sequence[Mapping[str, Any]]) -> None:
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


def _validate_budget(budget: Mapping[str, Any], notifications: Sequence[Mapping[str, Any]]) -> None:
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
        _validate_subscribers(entry["Subscribers"])


def _validate_notification(
    budget: Budget | None, notification: Mapping[str, Any], subscribers: Sequence[Any]
) -> None:
    if budget is not None:
        if len(budget.notifications) >= MAX_NOTIFICATIONS:
            raise InvalidParameterException(f"A budget can have at most {MAX_NOTIFICATIONS} notifications")
        _validate_notification_against(budget.budget, notification)
    _validate_subscribers(subscribers)


# -- the moto seam -------------------------------------------------------------------------------
_INSTALLED: dict[str, BudgetsSimulator] = {}
_REGISTRY_LOCK = threading.Lock()
_ORIGINALS: dict[str, Callable[..., Any]] = {}

_SEAM_SIGNATURES = {
    "create_budget": ["self", "account_id", "budget", "notifications"],
    "create_notification": ["self", "account_id", "budget_name", "notification", "subscribers"],
}

BudgetValidator = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], None]
NotificationValidator = Callable[[Budget | None, Mapping[str, Any], Sequence[Any]], None]


def _write_calculated_spend(budget: Budget, actual: Decimal, forecast: Decimal) -> None:
    """Data seam: moto's ``Budget.to_dict`` returns ``budget.budget["CalculatedSpend"]`` when set."""
    budget.budget["CalculatedSpend"] = {
        "ActualSpend": {"Amount": _api_amount(actual), "Unit": "USD"},
        "ForecastedSpend": {"Amount": _api_amount(forecast), "Unit": "USD"},
    }


def _patch_moto_budgets_backend(
    check_budget: BudgetValidator, check_notification: NotificationValidator
) -> None:
    """THE seam: wrap moto's ``BudgetsBackend.create_budget(account_id, budget, notifications)`` and
    ``create_notification(account_id, budget_name, notification, subscribers)`` so requests are
    validated before moto stores them (moto raises its ``JsonRESTError`` subclasses the same way).
    Guarded by tests/sandbox/test_budgets.py."""
    if _ORIGINALS:
        return
    for method, expected in _SEAM_SIGNATURES.items():
        actual = list(inspect.signature(getattr(BudgetsBackend, method)).parameters)
        if actual != expected:
            raise RuntimeError(
                f"moto's BudgetsBackend.{method} has parameters {actual}, expected {expected}: "
                "the budgets seam has moved; revisit sandbox/budgets.py"
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


def _unpatch_moto_budgets_backend() -> None:
    for name, original in _ORIGINALS.items():
        setattr(BudgetsBackend, name, original)
    _ORIGINALS.clear()


# -- the subscriber seam: the *Subscriber* actions moto's BudgetsResponse does not have ----------
SUBSCRIBER_OPERATIONS = ("DescribeSubscribersForNotification", "CreateSubscriber", "DeleteSubscriber")
_SUBSCRIBERS_PAGE = 100  # botocore's MaxResults maximum (a notification has at most 11 subscribers)
_MISSING = object()
_RESPONSE_ORIGINALS: dict[str, Any] = {}


def _notification_identity(notification: Mapping[str, Any]) -> tuple[Any, ...]:
    """What names a notification in the *Subscriber* requests (NotificationState is only reported)."""
    return (
        notification.get("NotificationType"),
        notification.get("ComparisonOperator"),
        _to_decimal(notification.get("Threshold"), "Threshold"),
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
    _validate_subscribers([subscriber])
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


def _patch_moto_budgets_responses() -> None:
    """The subscriber seam: moto calls ``BudgetsResponse.<action in snake_case>()`` for a request
    (in-process and over HTTP alike); set one such method per *Subscriber* action. Where moto has
    its own (a newer moto), it is overridden and restored on uninstall; tests/sandbox/test_budgets.py
    says which moto has."""
    if _RESPONSE_ORIGINALS:
        return
    for method, handler in _SUBSCRIBER_HANDLERS.items():
        _RESPONSE_ORIGINALS[method] = BudgetsResponse.__dict__.get(method, _MISSING)
        setattr(BudgetsResponse, method, handler)


def _unpatch_moto_budgets_responses() -> None:
    for method, original in _RESPONSE_ORIGINALS.items():
        if original is _MISSING:
            delattr(BudgetsResponse, method)
        else:
            setattr(BudgetsResponse, method, original)
    _RESPONSE_ORIGINALS.clear()
