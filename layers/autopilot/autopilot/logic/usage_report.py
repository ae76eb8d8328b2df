"""GET /clusters/{name}/usage: what each Slurm account (or user) spent on the cluster in a month, and
the capacity nobody used, adding up to the cluster's spend.

The jobs' lines are the month's totals (dal/usage.py, written as the agent reports finished jobs);
the unused line is the spend meter's month to date (logic/spend_meter.py, the figure of
``GET /clusters/{name}/cost``) less the jobs' cost. Both are list prices of the same nodes, so they
agree but for timing: the meter counts to its last run (every SpendMeterMinutes), a job counts once it
ended and the agent reported it. When the jobs cost more than the meter counted (the meter's first
run came after the month's first jobs, a node it missed between two runs), the unused line is 0, the
total is the jobs' cost and a warning says by how much.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from autopilot.dal.spend import SpendTable
from autopilot.dal.usage import UsageTable, usage_scope
from autopilot.logic.read_access import readable_cluster
from autopilot.logic.spend_meter import month_of
from autopilot.models.records import iso
from autopilot.models.usage import UNUSED_LINE, UsageBy, UsageLine, UsageTotals, UsageView

if TYPE_CHECKING:
    from datetime import datetime

    from autopilot.dal.spend import SpendStore
    from autopilot.dal.usage import UsageStore
    from autopilot.logic.dependencies import Dependencies


def _cents(amount: Decimal) -> float:
    return float(amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _percent(part: Decimal, whole: Decimal) -> float:
    return 0.0 if whole <= 0 else float((part * 100 / whole).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def usage_lines(totals: list[UsageTotals], by: UsageBy) -> list[tuple[str, Decimal, Decimal, int]]:
    """(name, usd, gpuHours, jobs) per account or user, largest spend first."""
    summed: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0), Decimal(0)])
    for t in totals:
        held = summed[t.account if by is UsageBy.ACCOUNT else t.user]
        held[0] += t.usd
        held[1] += t.gpu_hours
        held[2] += t.jobs
    lines = [(name, usd, gpu_hours, int(jobs)) for name, (usd, gpu_hours, jobs) in summed.items()]
    return sorted(lines, key=lambda line: (-line[1], line[0]))


def build_view(
    cluster_name: str,
    month: str,
    by: UsageBy,
    totals: list[UsageTotals],
    *,
    cluster_spend: Decimal,
    as_of: datetime | None,
    budgets: dict[str, str],
) -> UsageView:
    lines = usage_lines(totals, by)
    jobs_usd = sum((usd for _, usd, _, _ in lines), Decimal(0))
    unused = max(cluster_spend - jobs_usd, Decimal(0))
    total = jobs_usd + unused
    warnings = []
    if jobs_usd > cluster_spend:
        warnings.append(
            f"the month's jobs cost ${jobs_usd - cluster_spend:.2f} more than the spend meter counted for "
            f"the cluster (${cluster_spend:.2f}"
            + (f" as of {iso(as_of)}" if as_of else ", before its first run in the month")
            + "): the total is the jobs' cost and no capacity shows unused"
        )
    unpriced = sum(t.unpriced_jobs for t in totals)
    if unpriced:
        warnings.append(
            f"{unpriced} job(s) of the month ran on nodes that could not be priced (their instance type "
            "or list price unknown when reported): what those nodes cost shows as unused capacity"
        )
    view_lines = [
        UsageLine(
            name=name,
            usd=_cents(usd),
            gpu_hours=float(gpu_hours.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)),
            jobs=jobs,
            percent=_percent(usd, total),
            budget_usd=float(Decimal(budgets[name])) if by is UsageBy.ACCOUNT and name in budgets else None,
        )
        for name, usd, gpu_hours, jobs in lines
    ]
    view_lines.append(
        UsageLine(
            name=UNUSED_LINE, usd=_cents(unused), gpu_hours=0.0, jobs=0, percent=_percent(unused, total)
        )
    )
    return UsageView(
        cluster_name=cluster_name,
        month=month,
        by=by,
        lines=view_lines,
        jobs_usd=_cents(jobs_usd),
        cluster_spend_usd=_cents(cluster_spend),
        total_usd=_cents(total),
        as_of=as_of,
        warnings=warnings,
    )


def read_usage(
    deps: Dependencies,
    name: str,
    *,
    by: UsageBy = UsageBy.ACCOUNT,
    month: str | None = None,
    caller: str | None = None,
    usage: UsageStore | None = None,
    spend: SpendStore | None = None,
) -> UsageView:
    cluster = readable_cluster(deps, name, caller)  # 404 for a cluster the caller may not read, as the cost's
    month = month or month_of(deps.now())
    usage = usage or UsageTable(deps.settings.state_table_name)
    meter = (spend or SpendTable(deps.settings.state_table_name)).get_meter(name, month)
    return build_view(
        name,
        month,
        by,
        # this incarnation's (a cluster deleted and created again under the name starts afresh)
        usage.month_totals(usage_scope(name, cluster.created_at), month),
        cluster_spend=meter.month_to_date_usd if meter else Decimal(0),
        as_of=meter.as_of if meter else None,
        budgets=usage.account_budgets(name),
    )
