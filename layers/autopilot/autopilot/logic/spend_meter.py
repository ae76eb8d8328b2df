"""The spend meter: each ACTIVE cluster's hourly rate, month-to-date spend and forecast, every few minutes.

AWS Budgets refreshes its data up to three times a day, so its alerts come 8-12 hours after the spend;
this estimate follows the nodes minutes after they start. The rules (docs/operations.md, "Spend meter"):

- rate: the on-demand list price (autopilot.pricing) of every billable node (ListClusterNodes, all
  pages; :data:`BILLABLE_STATUSES`), summed;
- month to date: each run adds, per billable node, its price x the time since the later of the
  previous run, the node's LaunchTime and the start of the month (UTC). The first run of a cluster
  counts its nodes from their LaunchTime, so the figure starts where the month's usage does; a node
  that stopped between two runs is missed for that interval (at most one period);
- forecast: month to date + rate x the hours left in the month;
- alert: once per cluster, month and threshold (:data:`FORECAST_THRESHOLDS`, percent of the cluster's
  budget) when the forecast reaches it, on the alerts topic;
- a retried invocation (same schedule time) adds nothing: the figures are written only over older ones.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from botocore.exceptions import ClientError

from autopilot.dal.state_store import every_cluster
from autopilot.models.records import Cluster, ClusterStatus, iso
from autopilot.models.spend import SpendMeter
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient

    from autopilot.dal.spend import SpendStore
    from autopilot.dal.state_store import StateStore
    from autopilot.pricing import ListPrices

# The node states HyperPod bills (an instance is provisioned), as the sandbox's Budgets charges them.
# DetachInProgress / AttachInProgress: a node MoveClusterNodes moves keeps its instance ("The underlying
# instances aren't terminated"), so it is billed as Running, in whichever cluster lists it (AWS does not
# say how a moving node is billed: docs/sandbox.md, "Unverified").
BILLABLE_STATUSES: Final = frozenset(
    {
        "Running",
        "Failure",
        "SystemUpdating",
        "DeepHealthCheckInProgress",
        "DetachInProgress",
        "AttachInProgress",
    }
)
# The others: no instance yet, or none any more. Every ClusterInstanceStatus is one or the other
# (tests/unit/test_node_statuses.py fails on a status botocore adds).
UNBILLED_STATUSES: Final = frozenset({"Pending", "ShuttingDown", "NotFound"})
# Percent of the budget the forecast is alerted at: heading for it, and over it.
FORECAST_THRESHOLDS: Final = (80, 100)
ALERT_KIND: Final = "SpendForecast"
_HOUR: Final = Decimal(3600)
# Money is kept to a millionth of a dollar between runs (no drift from rounding every 15 minutes).
_PRECISION: Final = Decimal("0.000001")
_LIST_PAGE: Final = 100


class SpendMeterIncompleteError(RuntimeError):
    """Some clusters could not be metered this run (the invocation fails, so Lambda retries it)."""


@dataclass(frozen=True)
class BilledNode:
    instance_type: str
    launch_time: datetime


def month_of(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m")


def month_start(moment: datetime) -> datetime:
    utc = moment.astimezone(UTC)
    return datetime(utc.year, utc.month, 1, tzinfo=UTC)


def month_end(moment: datetime) -> datetime:
    start = month_start(moment)
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


def previous_month(moment: datetime) -> str:
    return month_of(month_start(moment) - timedelta(days=1))


def hours(delta: timedelta) -> Decimal:
    return Decimal(str(delta.total_seconds())) / _HOUR


def hourly_rate(nodes: Iterable[BilledNode], prices: Mapping[str, Decimal]) -> Decimal:
    """USD per hour of the nodes whose type has a price."""
    return sum((prices[n.instance_type] for n in nodes if n.instance_type in prices), Decimal(0))


def accrued(
    nodes: Iterable[BilledNode], prices: Mapping[str, Decimal], *, since: datetime | None, now: datetime
) -> Decimal:
    """Spend of this month between ``since`` (None: the nodes' launch) and ``now``."""
    floor = month_start(now)
    total = Decimal(0)
    for node in nodes:
        price = prices.get(node.instance_type)
        if price is None:
            continue
        start = max(node.launch_time, floor, since or node.launch_time)
        if start < now:
            total += price * hours(now - start)
    return total


def forecast(month_to_date: Decimal, rate: Decimal, now: datetime) -> Decimal:
    return month_to_date + rate * hours(month_end(now) - now)


def advance(
    previous: SpendMeter | None,
    nodes: list[BilledNode],
    prices: Mapping[str, Decimal],
    *,
    cluster: Cluster,
    budget_usd: Decimal | None,
    now: datetime,
) -> SpendMeter | None:
    """The figures at ``now`` after ``previous`` (this month's or last month's, or None before the
    first run); None when ``previous`` is not older than ``now`` (a retried run)."""
    if previous is not None and previous.as_of >= now:
        return None
    month = month_of(now)
    carried = previous.month_to_date_usd if previous is not None and previous.month == month else Decimal(0)
    month_to_date = carried + accrued(nodes, prices, since=previous.as_of if previous else None, now=now)
    rate = hourly_rate(nodes, prices)
    return SpendMeter(
        cluster_name=cluster.cluster_name,
        month=month,
        as_of=now,
        hourly_rate_usd=rate,
        month_to_date_usd=month_to_date.quantize(_PRECISION),
        forecast_usd=forecast(month_to_date, rate, now).quantize(_PRECISION),
        budget_usd=budget_usd,
        project=cluster.project,
        alerted=set(previous.alerted) if previous is not None and previous.month == month else set(),
        unpriced=sorted({n.instance_type for n in nodes if n.instance_type not in prices}),
    )


def due_thresholds(meter: SpendMeter) -> list[int]:
    """Thresholds the forecast has reached and that were not alerted this month."""
    if not meter.budget_usd:
        return []
    return [
        t
        for t in FORECAST_THRESHOLDS
        if t not in meter.alerted and meter.forecast_usd * 100 >= meter.budget_usd * t
    ]


def budget_of(cluster: Cluster) -> Decimal | None:
    return Decimal(cluster.budget_limit_usd) if cluster.budget_limit_usd else None


# --- the run ---------------------------------------------------------------------------------------


def billed_nodes(sagemaker: SageMakerClient, cluster_name: str) -> list[BilledNode]:
    nodes = []
    for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
        ClusterName=cluster_name, PaginationConfig={"PageSize": _LIST_PAGE}
    ):
        for summary in page.get("ClusterNodeSummaries", []):
            if summary["InstanceStatus"]["Status"] in BILLABLE_STATUSES:
                nodes.append(BilledNode(str(summary["InstanceType"]), summary["LaunchTime"]))
    return nodes


def active_clusters(store: StateStore) -> list[Cluster]:
    return [c for c in every_cluster(store, page_size=_LIST_PAGE) if c.status is ClusterStatus.ACTIVE]


def run_spend_meter(
    now: datetime,
    *,
    store: StateStore,
    spend: SpendStore,
    prices: ListPrices,
    sagemaker: SageMakerClient,
    sns: SNSClient,
    alerts_topic_arn: str,
) -> dict[str, int]:
    """Meter every ACTIVE cluster at ``now`` (the schedule's time); counts of what happened."""
    counts = {"metered": 0, "unchanged": 0, "gone": 0, "alerts": 0, "failed": 0}
    by_project: dict[str, list[SpendMeter]] = defaultdict(list)
    for cluster in active_clusters(store):
        try:
            metered = _meter_cluster(cluster, now, spend=spend, prices=prices, sagemaker=sagemaker)
            if metered is None:
                counts["gone"] += 1
                continue
            meter, fresh = metered
            counts["alerts"] += _alert(cluster, meter, spend=spend, sns=sns, topic_arn=alerts_topic_arn)
        except ClientError:
            logger.exception("cluster not metered", cluster=cluster.cluster_name)
            counts["failed"] += 1
            continue
        if not fresh:  # a retried run: these figures and their metrics are out already
            counts["unchanged"] += 1
            continue
        counts["metered"] += 1
        _publish(meter, "ClusterName", cluster.cluster_name)
        if cluster.project:
            by_project[cluster.project].append(meter)
    for project, meters in sorted(by_project.items()):
        _publish_total(meters, project)
    logger.info("spend metered", extra=counts)
    if counts["failed"]:
        raise SpendMeterIncompleteError(f"{counts['failed']} cluster(s) could not be metered: see the log")
    return counts


def _meter_cluster(
    cluster: Cluster, now: datetime, *, spend: SpendStore, prices: ListPrices, sagemaker: SageMakerClient
) -> tuple[SpendMeter, bool] | None:
    """The cluster's figures at ``now`` and whether this run wrote them (False: a retried or concurrent
    run did), or None when the cluster is gone from SageMaker."""
    try:
        nodes = billed_nodes(sagemaker, cluster.cluster_name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFound":
            return None  # deleted since the registry said ACTIVE: Cleanup records it
        raise
    priced: dict[str, Decimal] = {}
    for instance_type in sorted({n.instance_type for n in nodes}):
        price = prices.price(instance_type, now=now)
        if price is None:
            logger.error("no list price", cluster=cluster.cluster_name, instance_type=instance_type)
        else:
            priced[instance_type] = price
    month = month_of(now)
    current = spend.get_meter(cluster.cluster_name, month)
    previous = current or spend.get_meter(cluster.cluster_name, previous_month(now))
    meter = advance(previous, nodes, priced, cluster=cluster, budget_usd=budget_of(cluster), now=now)
    if meter is not None and spend.put_meter(meter):
        return meter, True
    # a retried or concurrent run got there first: its figures stand, its alerts may still be due
    stored = spend.get_meter(cluster.cluster_name, month)
    if stored is None:
        raise RuntimeError(f"the spend meter of {cluster.cluster_name} for {month} vanished")
    return stored, False


def _alert(cluster: Cluster, meter: SpendMeter, *, spend: SpendStore, sns: SNSClient, topic_arn: str) -> int:
    sent = 0
    for threshold in due_thresholds(meter):
        if not spend.claim_alert(cluster.cluster_name, meter.month, threshold):
            continue
        try:
            sns.publish(
                TopicArn=topic_arn,
                Subject=_subject(cluster, threshold),
                Message=json.dumps(alert_message(cluster, meter, threshold)),
            )
        except ClientError:
            spend.release_alert(cluster.cluster_name, meter.month, threshold)
            raise
        logger.info("spend forecast alert", cluster=cluster.cluster_name, threshold=threshold)
        sent += 1
    return sent


def _usd(amount: Decimal | None) -> str | None:
    return None if amount is None else f"{amount.quantize(Decimal('0.01'))}"


def _subject(cluster: Cluster, threshold: int) -> str:
    # SNS subjects are at most 100 characters; a cluster name is at most 63.
    return f"{cluster.cluster_name}: spend forecast {threshold}% of budget"[:100]


def alert_message(cluster: Cluster, meter: SpendMeter, threshold: int) -> dict[str, Any]:
    """The alert's body: what crossed, the figures behind it, whose cluster it is."""
    return {
        "alert": ALERT_KIND,
        "clusterName": cluster.cluster_name,
        "owner": cluster.owner,
        "project": cluster.project,
        "thresholdPercent": threshold,
        "message": (
            f"At ${_usd(meter.hourly_rate_usd)}/h, cluster {cluster.cluster_name} is forecast to spend "
            f"${_usd(meter.forecast_usd)} this month: {threshold}% or more of its "
            f"${_usd(meter.budget_usd)} budget "
            f"(${_usd(meter.month_to_date_usd)} so far). List prices; AWS Budgets will confirm later."
        ),
        "hourlyRateUsd": _usd(meter.hourly_rate_usd),
        "monthToDateUsd": _usd(meter.month_to_date_usd),
        "forecastUsd": _usd(meter.forecast_usd),
        "budgetUsd": _usd(meter.budget_usd),
        "month": meter.month,
        "asOf": iso(meter.as_of),
    }


def _publish(meter: SpendMeter, dimension: str, value: str) -> None:
    _emit(dimension, value, meter.hourly_rate_usd, meter.month_to_date_usd, meter.forecast_usd)


def _publish_total(meters: list[SpendMeter], project: str) -> None:
    _emit(
        "Project",
        project,
        sum((m.hourly_rate_usd for m in meters), Decimal(0)),
        sum((m.month_to_date_usd for m in meters), Decimal(0)),
        sum((m.forecast_usd for m in meters), Decimal(0)),
    )


def _emit(dimension: str, value: str, rate: Decimal, month_to_date: Decimal, forecast_usd: Decimal) -> None:
    # One EMF document per dimension set (the shared `metrics` flushes one set per invocation); the
    # namespace is POWERTOOLS_METRICS_NAMESPACE, as for `autopilot.observability.metrics`. No `service`
    # dimension: a metric is found (and alarmed on) by ClusterName or Project alone.
    figures = EphemeralMetrics(service="")
    figures.add_dimension(dimension, value)
    figures.add_metric("HourlyRateUsd", MetricUnit.NoUnit, float(rate))
    figures.add_metric("MonthToDateUsd", MetricUnit.NoUnit, float(month_to_date))
    figures.add_metric("ForecastUsd", MetricUnit.NoUnit, float(forecast_usd))
    figures.flush_metrics()
