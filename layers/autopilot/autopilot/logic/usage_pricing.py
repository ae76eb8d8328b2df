"""What a finished Slurm job cost: its nodes' list prices while it ran, shared by their GPUs.

The rules (docs/operations.md, "Chargeback"):
- a node's price is the spend meter's list price of its instance type (autopilot.pricing); the Slurm
  node name is HyperPod's (the first label of the node's PrivateDnsHostname, ``ip-10-1-2-3``), matched
  to ListClusterNodes' summaries as the healing sweep does (logic/healing/slurm_signal.py);
- the job's GPUs are spread evenly over its nodes (sacct's AllocTRES gives the job's total); on a node
  of G GPUs a job holding g of them pays g/G of the node's hourly price (at most the whole node);
- a job holding none of a node's GPUs (a CPU instance type, or a GPU node used without --gres) pays
  by its CPUs: its allocated CPUs (AllocTRES ``cpu``, spread evenly over its nodes like the GPUs) over
  the instance type's vCPUs (vcpus_for), at most the whole node — two jobs sharing a CPU node share its
  price; a job whose CPUs are unknown (an older agent) or on a type whose vCPUs are not known pays the
  whole node if it has no GPUs, nothing for a GPU node (shown as unused capacity);
- a job running over a month's end is split by time (UTC months), and counts as a job of the month
  it ended in;
- a node Autopilot cannot price (its type unknown: gone from ListClusterNodes and never seen listed by
  an earlier report, logic/usage_ingest.py; or a type without a list price) adds nothing and is named
  on the job (``unpricedNodes``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Final

from autopilot.logic.spend_meter import hours, month_end, month_of
from autopilot.models.agent import FinishedJob
from autopilot.models.usage import JobCost, MonthShare

# Kept to a millionth of a dollar and of a GPU-hour: thousands of jobs add up without drift.
PRECISION: Final = Decimal("0.000001")


@dataclass(frozen=True)
class NodeRate:
    """A Slurm node as priced: its instance type, that type's USD per hour (None: no list price) and
    its GPUs (0: a CPU instance)."""

    instance_type: str
    usd_per_hour: Decimal | None
    gpus: int
    # its vCPUs (None: not known, vcpus_for)
    vcpus: int | None = None


def vcpus_for(instance_type: str) -> int | None:
    """An instance type's vCPUs from its size, as EC2 names sizes: ``large`` 2, ``xlarge`` 4,
    ``<n>xlarge`` 4n (c5, m5, r5, g5, p4d, p5, trn1 ... follow it); None for another size (``medium``,
    ``metal``), whose vCPUs are not derivable from the name."""
    size = instance_type.rsplit(".", 1)[-1]
    if size == "large":
        return 2
    if size == "xlarge":
        return 4
    multiple = size.removesuffix("xlarge")
    return 4 * int(multiple) if size.endswith("xlarge") and multiple.isdigit() else None


def month_spans(start: datetime, end: datetime) -> Iterator[tuple[str, Decimal]]:
    """(month, hours) of [start, end) in each UTC calendar month it touches; nothing for a zero span."""
    cursor = start
    while cursor < end:
        boundary = min(month_end(cursor), end)
        yield month_of(cursor), hours(boundary - cursor)
        cursor = boundary


def price_job(job: FinishedJob, rates: Mapping[str, NodeRate]) -> JobCost:
    """The job's cost and GPU-hours, per month, at ``rates`` (Slurm node name -> rate)."""
    nodes = list(dict.fromkeys(job.nodes))  # a node named twice is one node
    gpus_per_node = Decimal(job.gpus) / len(nodes)
    cpus_per_node = Decimal(job.cpus) / len(nodes) if job.cpus else None
    spans = list(month_spans(job.start, job.end))
    usd: dict[str, Decimal] = {month: Decimal(0) for month, _ in spans}
    gpu_hours: dict[str, Decimal] = {month: Decimal(0) for month, _ in spans}
    unpriced: list[str] = []
    for node in nodes:
        rate = rates.get(node)
        if rate is None or rate.usd_per_hour is None:
            unpriced.append(node)
            continue
        held = min(gpus_per_node, Decimal(rate.gpus))
        if held:
            share = held / rate.gpus
        elif cpus_per_node is not None and rate.vcpus:
            share = min(cpus_per_node / rate.vcpus, Decimal(1))
        else:  # nothing else known: a CPU node whole, a GPU node not at all
            share = Decimal(0) if rate.gpus else Decimal(1)
        for month, span in spans:
            usd[month] += rate.usd_per_hour * share * span
            gpu_hours[month] += held * span
    months = {
        month: MonthShare(usd=usd[month].quantize(PRECISION), gpu_hours=gpu_hours[month].quantize(PRECISION))
        for month, _ in spans
    }
    return JobCost(
        job_id=job.job_id,
        account=job.account,
        user=job.user,
        partition=job.partition,
        node_count=len(nodes),
        gpus=job.gpus,
        start=job.start,
        end=job.end,
        state=job.state,
        usd=sum((m.usd for m in months.values()), Decimal(0)),
        gpu_hours=sum((m.gpu_hours for m in months.values()), Decimal(0)),
        months=months,
        ended_month=month_of(job.end),
        unpriced_nodes=unpriced,
    )
