"""The Budgets simulator's vocabulary: AWS Budgets' limits, the errors it answers with, the cost
ledger's lines and the CostFilters / FilterExpression matchers over them, and budget periods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from moto.core.exceptions import JsonRESTError

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
CENT = Decimal("0.01")
AMOUNT_STEP = Decimal("0.000001")


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


def period_phrase(unit: str) -> str:
    return {
        "DAILY": "per day",
        "MONTHLY": "for the current month",
        "QUARTERLY": "for the current quarter",
        "ANNUALLY": "for the current year",
    }.get(unit, "for the current budget period")
