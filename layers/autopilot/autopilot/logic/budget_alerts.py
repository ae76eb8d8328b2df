"""BudgetAlertsFunction: an AWS Budgets notification (SNS, plain text) becomes ONE actionable alert on the
alerts topic, and at 100 % ACTUAL the cluster's budget enforcement runs.

parse (models/budget_alerts.py) → DescribeBudget (actual, forecast, time unit) → the cluster from the
registry by budget name (``hyperpod-<cluster>``) → claim the (budget, threshold, period) alert with a
conditional write (dal/budget_alerts.py: a second notification of the same crossing publishes
nothing) → enforce (scale-to-min / block-growth, at most once per period) → publish → mark published.
A message that is not a Budgets notification is forwarded to the alerts topic as it came, never dropped.

A notification is a claim, not a fact: anyone allowed ``sns:Publish`` on the topic could write one
(the topic policy refuses them; this is the second line). Nothing is claimed, alerted or enforced
unless DescribeBudget's CalculatedSpend in this account confirms the threshold (``unconfirmed``), and
the period (the dedup key, a growth block's end) is the function's own clock's, never the message's
date: a message "of 2099" would otherwise block growth until 2100.

Nothing is lost to a failure (issue 20, finding 7). A scale-down SageMaker refuses (the cluster
``Updating``, throttling) leaves its ScaleToMin operation RUNNING, and the alert says so; every
RETRY_MINUTES the function's schedule (logic/budget_alert_retry.py) tries it again until it is done or
ENFORCEMENT_RETRY_FOR has passed (then FAILED), and announces the end. An alert SNS did not take is
kept on its item and published by the same schedule; an operation event EventBridge refused is only
logged (the operation record and the alert tell the same). So no work goes to the dead-letter queue
but that of an invocation that could not even record its claim.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.dal.budget_alerts import AlertKey, BudgetAlertTable, ClaimResult
from autopilot.emitted_events import OperationEventDetail, emit_operation_event
from autopilot.logic.budget_enforcement import scale_to_min_groups
from autopilot.models.budget_alerts import (
    BudgetAlert,
    BudgetNotification,
    EnforcementOutcome,
    NotABudgetNotificationError,
    parse_amount,
    parse_budget_notification,
)
from autopilot.models.cost_allocation import budget_name_for
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    Step,
    new_operation_id,
)
from autopilot.models.values import BudgetEnforcement
from autopilot.observability import Count, count, logger

if TYPE_CHECKING:
    from mypy_boto3_budgets import BudgetsClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient

    from autopilot.dal.spend import SpendStore
    from autopilot.dal.state_store import StateStore
    from autopilot.settings import BudgetAlertsSettings

BUDGETS_CONSOLE_URL = "https://console.aws.amazon.com/costmanagement/home#/budgets"
# Longer than the function's timeout: a claim older than this belongs to an invocation that died.
CLAIM_LEASE_SECONDS = 120
# An alert item outlives its period by this long (the state table's TTL then removes it).
KEEP_AFTER_PERIOD = timedelta(days=35)
ENFORCED_AT_PERCENT = Decimal(100)
# A refused scale-down is retried this long (a cluster update takes minutes to an hour), then FAILED.
ENFORCEMENT_RETRY_FOR = timedelta(hours=6)
RETRY_MINUTES = 5  # template.yaml, BudgetAlertsFunction's RetryUnfinished schedule
# SageMaker's refusals that no retry changes: the operation fails at once.
_FINAL_REFUSALS = frozenset({"ResourceNotFound", "AccessDeniedException"})
# Operations older than this are not looked at again (they failed at ENFORCEMENT_RETRY_FOR).
LOOKBACK = ENFORCEMENT_RETRY_FOR + timedelta(days=1)
SNS_SUBJECT_MAX = 100

# (cluster name, the day Budgets notified) -> (USD per hour, where the figure comes from), or None
HourlyRate = Callable[[str, date], tuple[Decimal, str] | None]


def spend_meter_rate(spend: SpendStore) -> HourlyRate:
    """The cluster's hourly rate from SpendMeterFunction's figures of the notification's month (running
    nodes at list prices, every SpendMeterMinutes); None before the meter has run for the cluster."""

    def rate(cluster_name: str, day: date) -> tuple[Decimal, str] | None:
        meter = spend.get_meter(cluster_name, f"{day:%Y-%m}")
        if meter is None:
            return None
        return meter.hourly_rate_usd, f"spend meter, {meter.as_of.isoformat()}"

    return rate


class Handled(StrEnum):
    PUBLISHED = "published"
    DUPLICATE = "duplicate"
    FORWARDED = "forwarded"
    # DescribeBudget does not confirm what the message claims: nothing alerted, nothing enforced
    UNCONFIRMED = "unconfirmed"
    # SNS did not take the alert: kept on its item, published by the scheduled retry
    RETRYING = "retrying"


class AlertInFlightError(RuntimeError):
    """Another invocation holds a live claim on this alert: retried later (Lambda's async retries)."""


@dataclass
class BudgetAlertDeps:
    settings: BudgetAlertsSettings
    store: StateStore
    alerts: BudgetAlertTable
    budgets: BudgetsClient
    sagemaker: SageMakerClient
    sns: SNSClient
    events: EventBridgeClient
    hourly_rate: HourlyRate
    now: Callable[[], datetime]


@dataclass(frozen=True)
class Period:
    key: str
    start: datetime
    end: datetime


def budget_period(time_unit: str, day: date, budget: dict[str, Any] | None = None) -> Period:
    """The budget period holding ``day`` (UTC calendar periods, as AWS Budgets counts them)."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    if time_unit == "DAILY":
        return Period(day.isoformat(), start, start + timedelta(days=1))
    if time_unit == "QUARTERLY":
        first = (day.month - 1) // 3 * 3 + 1
        begin = start.replace(month=first, day=1)
        return Period(f"{day.year}-Q{(first - 1) // 3 + 1}", begin, _add_months(begin, 3))
    if time_unit == "ANNUALLY":
        begin = start.replace(month=1, day=1)
        return Period(str(day.year), begin, begin.replace(year=day.year + 1))
    if time_unit == "CUSTOM" and budget and budget.get("TimePeriod"):
        period = budget["TimePeriod"]
        begin, end = _as_utc(period["Start"]), _as_utc(period["End"])
        return Period(f"{begin:%Y-%m-%d}..{end:%Y-%m-%d}", begin, end)
    begin = start.replace(day=1)
    return Period(f"{day:%Y-%m}", begin, _add_months(begin, 1))


def _add_months(start: datetime, months: int) -> datetime:
    index = start.month - 1 + months
    return start.replace(year=start.year + index // 12, month=index % 12 + 1)


def _as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def handle_notification(message: str, subject: str | None, deps: BudgetAlertDeps) -> Handled:
    """One SNS record from AWS Budgets: at most one alert published, enforcement run if due."""
    now = deps.now()
    try:
        notification = parse_budget_notification(message)
    except NotABudgetNotificationError as exc:
        logger.warning("not an AWS Budgets notification; forwarded", reason=str(exc), subject=subject)
        _publish(
            deps,
            subject=(subject or "Unrecognised budget notification")[:SNS_SUBJECT_MAX],
            body={"kind": "UnrecognisedBudgetNotification", "reason": str(exc), "message": message},
            cluster_name=None,
        )
        return Handled.FORWARDED

    budget = _describe_budget(deps, notification.budget_name)
    reason = unconfirmed(notification, budget, deps.settings.account)
    if reason is not None:
        logger.warning(
            "budget notification not confirmed by DescribeBudget; dropped",
            reason=reason,
            budget=notification.budget_name,
            alert_type=notification.alert_type,
            claimed_usd=str(notification.amount_usd),
            threshold_usd=str(notification.threshold_usd),
            notified_on=str(notification.notified_on),
        )
        count(Count.UNTRUSTED_BUDGET_MESSAGES)
        return Handled.UNCONFIRMED
    day = now.date()  # the function's clock: the message's own date is the sender's claim
    period = budget_period(str((budget or {}).get("TimeUnit", "MONTHLY")), day, budget)
    cluster = _cluster_of(deps, notification.budget_name)
    percent = notification.threshold_percent
    mode = _enforcement_due(cluster, notification)
    key = AlertKey(
        budget_name=notification.budget_name,
        period=period.key,
        alert_type=notification.alert_type,
        threshold=str(percent) if percent is not None else f"usd{notification.threshold_usd}",
    )
    claim = deps.alerts.claim(
        key,
        now=now,
        lease_seconds=CLAIM_LEASE_SECONDS,
        operation_id=new_operation_id(now) if mode is BudgetEnforcement.SCALE_TO_MIN else None,
        expires_at=int((period.end + KEEP_AFTER_PERIOD).timestamp()),
        message=message,
        subject=subject,
    )
    if claim.result is ClaimResult.PUBLISHED:
        logger.info(
            "duplicate budget notification; already alerted", budget=key.budget_name, period=key.period
        )
        return Handled.DUPLICATE
    if claim.result is ClaimResult.IN_FLIGHT:
        raise AlertInFlightError(f"the alert {key} is being handled by another invocation")

    enforcement: EnforcementOutcome | None = None
    if mode is not None and cluster is not None:
        enforcement = _enforce(
            deps,
            mode=mode,
            cluster=cluster,
            notification=notification,
            period=period,
            operation_id=claim.operation_id,
            now=now,
        )
    alert = _alert(
        deps, notification, day=day, budget=budget, cluster=cluster, period=period, enforcement=enforcement
    )
    message_id = publish_or_keep(
        deps, key, subject=_subject(alert), body=alert.model_dump(mode="json", by_alias=True)
    )
    if message_id is None:
        return Handled.RETRYING
    logger.info(
        "budget alert published",
        budget=alert.budget_name,
        cluster=alert.cluster_name,
        alert_type=alert.alert_type,
        threshold_percent=str(percent),
        period=period.key,
        enforcement=enforcement.result if enforcement else None,
    )
    return Handled.PUBLISHED


# Budgets states a percentage threshold in cents: its percentage of the limit is rounded
CENT = Decimal("0.01")


def unconfirmed(notification: BudgetNotification, budget: dict[str, Any] | None, account: str) -> str | None:
    """Why DescribeBudget does not confirm the notification (None when it does): the budget must be
    this account's, and its CalculatedSpend of the current period (ActualSpend for ACTUAL,
    ForecastedSpend for FORECASTED) must stand to the threshold, taken as the notification's share
    of the budget's own limit (a message cannot lower the limit), as the notification says it does."""
    if notification.account_id is not None and notification.account_id != account:
        return f"the message names account {notification.account_id}, not {account}"
    if budget is None:
        return f"no budget {notification.budget_name} in account {account}"
    limit = (budget.get("BudgetLimit") or {}).get("Amount")
    which = "ActualSpend" if notification.alert_type == "ACTUAL" else "ForecastedSpend"
    spend = _spend(budget, which)
    if limit is None or spend is None:
        return f"DescribeBudget has no limit or no {which}"
    percent = notification.threshold_percent
    threshold = (
        parse_amount(str(limit)) * percent / 100 if percent is not None else notification.threshold_usd
    )
    holds = {
        "GREATER_THAN": spend + CENT > threshold,
        "LESS_THAN": spend - CENT < threshold,
        "EQUAL_TO": abs(spend - threshold) <= CENT,
    }[notification.comparison]
    if not holds:
        return f"{which} is ${spend}, not {notification.comparison} the ${threshold:.2f} threshold"
    return None


def _describe_budget(deps: BudgetAlertDeps, name: str) -> dict[str, Any] | None:
    try:
        response = deps.budgets.describe_budget(AccountId=deps.settings.account, BudgetName=name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NotFoundException":
            return None  # deleted since it notified: the message's own figures still tell
        raise
    return dict(response["Budget"])


def _cluster_of(deps: BudgetAlertDeps, budget_name: str) -> Cluster | None:
    """The registered cluster whose budget this is (``hyperpod-<cluster>``); None for another budget."""
    prefix = budget_name_for("")
    if not budget_name.startswith(prefix):
        return None
    cluster = deps.store.get_cluster(budget_name.removeprefix(prefix))
    return cluster if cluster is not None and cluster.budget_name == budget_name else None


def _enforcement_due(cluster: Cluster | None, notification: BudgetNotification) -> BudgetEnforcement | None:
    if cluster is None or notification.alert_type != "ACTUAL" or notification.comparison != "GREATER_THAN":
        return None
    percent = notification.threshold_percent
    if percent is None or percent < ENFORCED_AT_PERCENT:
        return None
    mode = BudgetEnforcement(cluster.budget_enforcement or BudgetEnforcement.ALERT)
    return None if mode is BudgetEnforcement.ALERT else mode


def _enforce(
    deps: BudgetAlertDeps,
    *,
    mode: BudgetEnforcement,
    cluster: Cluster,
    notification: BudgetNotification,
    period: Period,
    operation_id: str | None,
    now: datetime,
) -> EnforcementOutcome:
    if cluster.status is not ClusterStatus.ACTIVE:
        return EnforcementOutcome(
            mode=mode, result="skipped", message=f"the cluster is {cluster.status.value}, not ACTIVE"
        )
    if mode is BudgetEnforcement.BLOCK_GROWTH:
        until = period.end.isoformat()
        deps.alerts.block_growth(
            cluster.cluster_name, until=period.end, at=now, by=f"budget:{notification.budget_name}"
        )
        return EnforcementOutcome(
            mode=mode,
            result="done",
            message=f"scale-ups are refused until {until} (the next budget period) or an admin lifts it",
            growth_blocked_until=until,
        )
    if operation_id is None:  # a claim made before the cluster's enforcement was scale-to-min
        operation_id = new_operation_id(now)
    return scale_to_min(deps, cluster, notification.budget_name, operation_id, now)


def scale_to_min(
    deps: BudgetAlertDeps,
    cluster: Cluster,
    budget_name: str,
    operation_id: str,
    now: datetime,
) -> EnforcementOutcome:
    mode = BudgetEnforcement.SCALE_TO_MIN
    operation = Operation(
        operation_id=operation_id,
        operation_type=OperationType.SCALE_TO_MIN,
        cluster_name=cluster.cluster_name,
        status=OperationStatus.RUNNING,
        created_at=now,
        updated_at=now,
        requested_by=f"budget:{budget_name}",
    )
    if not deps.alerts.record_operation(operation):
        held = deps.store.get_operation(operation_id)
        if held is not None and held.status is not OperationStatus.RUNNING:
            return EnforcementOutcome(
                mode=mode,
                result="already-done" if held.status is OperationStatus.SUCCEEDED else "failed",
                message="scaled down earlier"
                if held.status is OperationStatus.SUCCEEDED
                else "the scale-down failed earlier",
                operation_id=operation_id,
            )
        if held is not None:
            operation = held  # a retry: the deadline runs from the first attempt
    retry_until = operation.created_at + ENFORCEMENT_RETRY_FOR
    steps = [Step(name="Describe Cluster", entered_at=now)]
    try:
        if cluster.worker_groups is None:
            raise _Refused("WorkerGroupsUnknown", "the cluster record names no worker groups")
        described = deps.sagemaker.describe_cluster(ClusterName=cluster.cluster_name)
        specs, counts = scale_to_min_groups(dict(described), cluster.worker_groups)
        if specs:
            steps.append(Step(name="Update Cluster", entered_at=deps.now()))
            deps.sagemaker.update_cluster(
                ClusterName=cluster.cluster_name,
                InstanceGroups=specs,  # type: ignore[arg-type]  # DescribeCluster's own shapes
            )
    except (ClientError, _Refused) as exc:
        error = _operation_error(exc)
        code = exc.code if isinstance(exc, _Refused) else error.error.removeprefix("SageMaker.")
        if not isinstance(exc, _Refused) and code not in _FINAL_REFUSALS and now < retry_until:
            logger.warning(
                "scale-to-min refused; retried later",
                cluster=cluster.cluster_name,
                error=error.error,
                cause=error.cause,
                retry_until=retry_until.isoformat(),
            )
            return EnforcementOutcome(
                mode=mode,
                result="pending",
                message=f"SageMaker refused UpdateCluster ({error.error}: {error.cause}); retried every "
                f"{RETRY_MINUTES} minutes until {retry_until.isoformat()}",
                operation_id=operation_id,
            )
        finish_operation(deps, operation, OperationStatus.FAILED, steps, error)
        logger.error(
            "scale-to-min failed", cluster=cluster.cluster_name, error=error.error, cause=error.cause
        )
        return EnforcementOutcome(
            mode=mode, result="failed", message=f"{error.error}: {error.cause}", operation_id=operation_id
        )
    finish_operation(deps, operation, OperationStatus.SUCCEEDED, steps, None)
    shrunk = {g: c for g, c in counts.items() if c[0] > c[1]}
    return EnforcementOutcome(
        mode=mode,
        result="done" if specs else "skipped",
        message=(
            "worker groups asked to scale to their minimum: "
            + ", ".join(f"{g} {before} -> {after}" for g, (before, after) in shrunk.items())
            if specs
            else "the worker groups are at their minimum already"
        ),
        operation_id=operation_id,
        instance_counts=counts,
    )


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _operation_error(exc: ClientError | _Refused) -> OperationError:
    if isinstance(exc, _Refused):
        return OperationError(error=exc.code, cause=str(exc))
    details = exc.response.get("Error", {})
    return OperationError(
        error=f"SageMaker.{details.get('Code', 'Error')}", cause=str(details.get("Message", exc))
    )


def finish_operation(
    deps: BudgetAlertDeps,
    operation: Operation,
    status: OperationStatus,
    steps: list[Step],
    error: OperationError | None,
) -> None:
    deps.alerts.finish_operation(
        operation.operation_id, status=status, steps=steps, at=deps.now(), error=error
    )
    try:
        emit_operation_event(
            OperationEventDetail(
                operation_id=operation.operation_id,
                operation_type=operation.operation_type.value,
                cluster_name=operation.cluster_name,
                status=status.value,
                error=error.error if error else None,
                cause=error.cause if error else None,
            ),
            client=deps.events,
        )
    except (ClientError, BotoCoreError, RuntimeError):
        # The scale-down happened and is recorded; the alert announces it. A refused event must not
        # fail the alert (before this, the whole notification went to the dead-letter queue).
        logger.warning("operation event not sent", operation_id=operation.operation_id, exc_info=True)


def _spend(budget: dict[str, Any] | None, which: str) -> Decimal | None:
    amount = ((budget or {}).get("CalculatedSpend") or {}).get(which, {}).get("Amount")
    return None if amount is None else parse_amount(str(amount))


def _alert(
    deps: BudgetAlertDeps,
    notification: BudgetNotification,
    *,
    day: date,
    budget: dict[str, Any] | None,
    cluster: Cluster | None,
    period: Period,
    enforcement: EnforcementOutcome | None,
) -> BudgetAlert:
    limit = (budget or {}).get("BudgetLimit", {}).get("Amount")
    budget_usd = parse_amount(str(limit)) if limit is not None else notification.budgeted_usd
    rate = deps.hourly_rate(cluster.cluster_name, day) if cluster is not None else None
    actual = _spend(budget, "ActualSpend")
    forecast = _spend(budget, "ForecastedSpend")
    percent = notification.threshold_percent
    who = f"cluster {cluster.cluster_name}" if cluster else f"budget {notification.budget_name}"
    summary = (
        f"{who}: {notification.alert_type} cost ${notification.amount_usd:,.2f} crossed "
        f"{f'{percent}% of ' if percent is not None else ''}the ${budget_usd:,.2f} budget "
        f"(threshold ${notification.threshold_usd:,.2f}, period {period.key})"
    )
    if rate is not None:
        summary += f"; now burning ${rate[0]:,.2f}/hour"
    if enforcement is not None:
        summary += f"; {enforcement.mode.value}: {enforcement.message}"
    return BudgetAlert(
        summary=summary,
        budget_name=notification.budget_name,
        cluster_name=cluster.cluster_name if cluster else None,
        owner=cluster.owner if cluster else None,
        project=cluster.project if cluster else None,
        alert_type=notification.alert_type,
        threshold_percent=percent,
        threshold_usd=notification.threshold_usd,
        budget_usd=budget_usd,
        notified_amount_usd=notification.amount_usd,
        actual_usd=actual,
        forecast_usd=forecast,
        hourly_rate_usd=rate[0] if rate else None,
        hourly_rate_source=rate[1] if rate else None,
        period=period.key,
        cluster_url=f"{deps.settings.api_url}/clusters/{cluster.cluster_name}" if cluster else None,
        budget_console_url=BUDGETS_CONSOLE_URL,
        enforcement=enforcement,
    )


def _subject(alert: BudgetAlert) -> str:
    who = alert.cluster_name or alert.budget_name
    share = f"{alert.threshold_percent}%" if alert.threshold_percent is not None else "its threshold"
    verb = "spent" if alert.alert_type == "ACTUAL" else "forecast to spend"
    subject = f"HyperPod budget: {who} {verb} {share} of ${alert.budget_usd:,.2f}"
    return subject[:SNS_SUBJECT_MAX]


def publish_or_keep(
    deps: BudgetAlertDeps, key: AlertKey, *, subject: str, body: dict[str, Any]
) -> str | None:
    """Publish the alert and mark its item published; when SNS refuses, keep the alert on the item
    for the scheduled retry (None)."""
    try:
        message_id = _publish(deps, subject=subject, body=body, cluster_name=body.get("clusterName"))
    except (ClientError, BotoCoreError):
        logger.warning("alert not published; kept for the scheduled retry", alert=str(key), exc_info=True)
        deps.alerts.keep_alert(key, subject=subject, body=json.dumps(body))
        return None
    deps.alerts.mark_published(key, message_id=message_id, at=deps.now())
    return message_id


def _publish(deps: BudgetAlertDeps, *, subject: str, body: dict[str, Any], cluster_name: str | None) -> str:
    attributes: dict[str, Any] = {"kind": {"DataType": "String", "StringValue": str(body["kind"])}}
    if cluster_name:
        attributes["clusterName"] = {"DataType": "String", "StringValue": cluster_name}
    response = deps.sns.publish(
        TopicArn=deps.settings.alerts_topic_arn,
        Subject=subject,
        Message=json.dumps(body, indent=2),
        MessageAttributes=attributes,
    )
    return str(response["MessageId"])
