"""Chargeback's intake: the finished jobs of an agent report (``POST /agent/{name}/reports``, after the
caller is trusted and the body parsed), priced and counted once each, then the department budgets of
the accounts they ran under checked (logic/account_budget_alerts.py).

The agent resends a job until a report carrying it is answered 200 (its cursor advances only past an
accepted report), so every job arrives at least once, maybe many times, maybe in two invocations at
once: the jobs already counted are skipped (one BatchGetItem), the others are written with their
totals in transactions whose job put is conditional (dal/usage.py). An error here fails the report
(the agent sends the same jobs again) rather than losing them. The budgets are checked on every
report carrying jobs, counted now or before: an alert a failure left unsent goes out on the resend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final, Protocol

from autopilot_config.models.instance_types import gpus_for

from autopilot.dal.usage import usage_scope
from autopilot.logic.account_budget_alerts import check_account_budgets
from autopilot.logic.healing.slurm_signal import slurm_name
from autopilot.logic.spend_meter import month_of
from autopilot.logic.usage_pricing import NodeRate, month_spans, price_job, vcpus_for
from autopilot.models.agent import FinishedJob, SlurmNode
from autopilot.models.records import Cluster, iso
from autopilot.models.usage import job_ref
from autopilot.observability import Count, count, logger

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient

    from autopilot.dal.usage import UsageStore

_LIST_PAGE = 100
# A job running longer than this is refused: no Slurm time limit allows it (sacct prints such starts
# only when its record is wrong), and its months' totals (one item each) must fit the one
# TransactWriteItems (at most 100 items) that counts it: 13 months at most.
MAX_JOB_SPAN: Final = timedelta(days=366)


class PriceList(Protocol):
    """autopilot.pricing.ListPrices: the spend meter's list prices (cached in the state table)."""

    def price(self, instance_type: str, *, now: datetime) -> Decimal | None: ...


@dataclass
class UsageDeps:
    usage: UsageStore
    prices: PriceList
    # cluster name -> {Slurm node name: instance type} of the nodes SageMaker lists now
    node_types: Callable[[str], dict[str, str]]
    # made on first use (a report without jobs, or without an alert due, needs none)
    sns: Callable[[], SNSClient]
    alerts_topic_arn: str
    # the cluster's owner and project, for the alert (None: not registered)
    cluster_tags: Callable[[str], tuple[str | None, str | None]] = field(default=lambda _: (None, None))
    # the cluster's registry createdAt (None: not registered): its usage items' incarnation
    # (dal/usage.py usage_scope), so a cluster created again under the name starts afresh
    created_at: Callable[[str], datetime | None] = field(default=lambda _: None)


@dataclass(frozen=True)
class Ingested:
    counted: int
    skipped: int
    alerts: int
    unpriced_nodes: int
    # the jobs refused (never counted): {"jobId", "start", "reason"} each, for the report's answer
    rejected: list[dict[str, str]] = field(default_factory=list)


def rejection(index: int, job: FinishedJob) -> str | None:
    """Why the report's ``jobs[index]`` cannot be counted; None when it can. An end later than ``now``
    is not refused: Slurm's clock is the Slurm host's, not the control plane's (the sandbox's demo runs
    the control plane weeks behind real Slurm), and such a job is stored like any other."""
    if job.end - job.start > MAX_JOB_SPAN:
        span = f"{iso(job.start)} to {iso(job.end)}"
        return f"jobs[{index}].start: the job ran over {MAX_JOB_SPAN.days} days ({span})"
    return None


def registry_created_at(get_cluster: Callable[[str], Cluster | None]) -> Callable[[str], datetime | None]:
    """UsageDeps.created_at from the registry (StateTable.get_cluster)."""

    def created_at(cluster_name: str) -> datetime | None:
        cluster = get_cluster(cluster_name)
        return cluster.created_at if cluster else None

    return created_at


def listed_node_types(sagemaker: Callable[[], SageMakerClient]) -> Callable[[str], dict[str, str]]:
    """Slurm node name -> instance type of each node ListClusterNodes shows (all pages); the client is
    made on first use (a report without jobs needs none)."""

    def node_types(cluster_name: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for page in (
            sagemaker()
            .get_paginator("list_cluster_nodes")
            .paginate(ClusterName=cluster_name, PaginationConfig={"PageSize": _LIST_PAGE})
        ):
            for summary in page.get("ClusterNodeSummaries", []):
                # any status: a node shutting down (replaced since the job ended) still tells its type
                name = slurm_name(summary)
                if name:
                    found[name] = str(summary["InstanceType"])
        return found

    return node_types


def node_rates(
    deps: UsageDeps, cluster_name: str, nodes: Iterable[str], *, now: datetime, scope: str | None = None
) -> dict[str, NodeRate]:
    """The rate of each named node: its instance type from ListClusterNodes now, else as an earlier
    report's listing had it (a node replaced since its job ended); a node known to neither has none
    (unpriced). ``scope``: the cluster's incarnation (dal/usage.py usage_scope)."""
    scope = scope or cluster_name
    listed = deps.node_types(cluster_name)
    types = {**deps.usage.remembered_node_types(scope), **listed}
    deps.usage.remember_node_types(scope, listed, now=now)
    prices: dict[str, Decimal | None] = {}
    rates: dict[str, NodeRate] = {}
    for node in sorted(set(nodes)):
        instance_type = types.get(node)
        if instance_type is None:
            continue
        if instance_type not in prices:
            prices[instance_type] = deps.prices.price(instance_type, now=now)
        rates[node] = NodeRate(
            instance_type, prices[instance_type], gpus_for(instance_type), vcpus_for(instance_type)
        )
    return rates


def ingest_jobs(
    deps: UsageDeps,
    cluster_name: str,
    jobs: Sequence[FinishedJob],
    *,
    running: Sequence[SlurmNode],
    now: datetime,
) -> Ingested:
    """Count the report's finished jobs once each, then check the budgets of their accounts."""
    if not jobs:
        return Ingested(0, 0, 0, 0)
    # Refused one by one, the others counted: one job the control plane cannot store must not block the
    # agent's cursor (a 4xx of the whole report would make it resend the job forever).
    rejected: list[dict[str, str]] = []
    kept: list[FinishedJob] = []
    for index, job in enumerate(jobs):
        why = rejection(index, job)
        if why is None:
            kept.append(job)
        else:
            rejected.append({"jobId": job.job_id, "start": iso(job.start), "reason": why})
    if rejected:
        count(Count.FINISHED_JOBS_REJECTED, len(rejected))
        logger.warning(
            "finished jobs refused", cluster=cluster_name, jobs=rejected[:20], refused=len(rejected)
        )
    jobs = kept
    if not jobs:
        return Ingested(0, 0, 0, 0, rejected)
    scope = usage_scope(cluster_name, deps.created_at(cluster_name))
    # the first of each (job id, start)
    unique = list({_ref(job): job for job in reversed(jobs)}.values())[::-1]
    known = deps.usage.known_jobs(scope, [_ref(j) for j in unique])
    new = [j for j in unique if _ref(j) not in known]
    unpriced = 0
    counted: list[str] = []
    if new:
        rates = node_rates(deps, cluster_name, (n for j in new for n in j.nodes), now=now, scope=scope)
        costs = [price_job(job, rates) for job in new]
        for cost in costs:
            if cost.unpriced_nodes:
                unpriced += len(cost.unpriced_nodes)
                logger.warning(
                    "job's nodes not priced",
                    cluster=cluster_name,
                    job_id=cost.job_id,
                    nodes=cost.unpriced_nodes[:20],
                )
        counted = deps.usage.record_jobs(scope, costs, now=now)
    months = _months(jobs)
    alerts = check_account_budgets(
        deps,
        cluster_name,
        scope=scope,
        accounts={j.account for j in jobs},
        months=months,
        running=running,
        now=now,
    )
    result = Ingested(len(counted), len(jobs) - len(counted), alerts, unpriced, rejected)
    logger.info(
        "finished jobs ingested",
        cluster=cluster_name,
        counted=result.counted,
        skipped=result.skipped,
        alerts=alerts,
        unpriced_nodes=unpriced,
        rejected=len(rejected),
    )
    return result


def _ref(job: FinishedJob) -> str:
    return job_ref(job.job_id, job.start)


def _months(jobs: Iterable[FinishedJob]) -> set[str]:
    months: set[str] = set()
    for job in jobs:
        months |= {month for month, _ in month_spans(job.start, job.end)} | {month_of(job.end)}
    return months
