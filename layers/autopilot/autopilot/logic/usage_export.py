"""UsageExportFunction: each cluster's chargeback as CSV files finance (or Athena) reads, in the S3
bucket and prefix the stack names (UsageExportBucket, UsageExportPrefix; docs/operations.md,
"Chargeback").

Layout: ``s3://<bucket>/<prefix>/cluster=<name>/month=<YYYY-MM>/usage.csv`` — Hive-style partitions,
so one Athena table over the prefix (``PARTITIONED BY (cluster string, month string)``, partition
projection or MSCK REPAIR TABLE) reads every cluster and month. The partition values are in the path
only, not in the file (Athena would refuse a column named as a partition key).

One row per (Slurm account, user) of the month, and a last row ``(unused capacity)`` (no user) for what
the spend meter counted and no job used, as ``GET /clusters/{name}/usage`` shows it; the usd column
adds up to the cluster's month to date (or to the jobs' cost when they cost more). Per pair, not per
job: the totals are what the state table keeps per month (a job's own item has no month key to query
by), and a department's bill needs no more.

Each daily run rewrites the current month to date for every registered cluster, and the month before
once, on the first run a day or more after it ended (a job of its last hours reported late still
counts): marked ``USAGEEXPORT#<month>`` so it is not written again. CSV, not Parquet: pyarrow would
add ~60 MB to a layer whose limit is 250 MB unzipped for a file of a few hundred rows; Athena reads
CSV as well (docs/operations.md has the table's DDL).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Final, NamedTuple

from autopilot.dal.usage import RETENTION, usage_scope
from autopilot.logic.spend_meter import month_of, month_start, previous_month
from autopilot.models.records import iso
from autopilot.models.usage import UNUSED_LINE, UsageTotals
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.dal.spend import SpendStore
    from autopilot.dal.usage import UsageStore

COLUMNS: Final = ("account", "user", "usd", "gpu_hours", "jobs", "cluster_spend_usd", "as_of")
# The closed month is written once this long after it ended: reports of its last jobs have come in.
CLOSE_AFTER: Final = timedelta(days=1)
_CENTS: Final = Decimal("0.01")
_MICRO: Final = Decimal("0.000001")

# (key, body) -> None: S3 PutObject of a text/csv object
PutObject = Callable[[str, str], None]


class ExportedCluster(NamedTuple):
    """A cluster of the registry as the export needs it: its name, its createdAt (its incarnation's
    usage items, dal/usage.py usage_scope) and, deleted, when (its DELETED record's updatedAt)."""

    name: str
    created_at: datetime | None
    deleted_at: datetime | None = None


def object_key(prefix: str, cluster_name: str, month: str) -> str:
    folder = prefix.strip("/")
    return f"{folder + '/' if folder else ''}cluster={cluster_name}/month={month}/usage.csv"


def usage_csv(totals: Iterable[UsageTotals], *, cluster_spend: Decimal, as_of: str | None) -> str:
    """The month's rows, largest spend first, then the unused capacity."""
    ranked = sorted(totals, key=lambda t: (-t.usd, t.account, t.user))
    jobs_usd = sum((t.usd for t in ranked), Decimal(0))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    spend, stamp = f"{cluster_spend.quantize(_CENTS)}", as_of or ""
    for t in ranked:
        writer.writerow(
            [t.account, t.user, t.usd.quantize(_MICRO), t.gpu_hours.quantize(_MICRO), t.jobs, spend, stamp]
        )
    unused = max(cluster_spend - jobs_usd, Decimal(0))
    writer.writerow([UNUSED_LINE, "", unused.quantize(_MICRO), "0", "0", spend, stamp])
    return out.getvalue()


def export_usage(
    now: datetime,
    clusters: Iterable[ExportedCluster],
    *,
    usage: UsageStore,
    spend: SpendStore,
    put_object: PutObject,
    prefix: str,
) -> dict[str, int]:
    """Write the month to date of every cluster, and the closed month where due; counts. The totals are
    the cluster's incarnation's (dal/usage.py usage_scope). A cluster deleted is written for the months
    it lived in: its closed month once (deleted mid-month, its last month still gets its CSV), the
    current month while it was deleted in it."""
    counts = {"monthToDate": 0, "closedMonths": 0, "empty": 0}
    current = month_of(now)
    closed = previous_month(now)
    close_due = now >= month_start(now) + CLOSE_AFTER
    # each month's first instant, to compare a deletion time with as a time (not its ISO text)
    starts = {current: month_start(now), closed: month_start(month_start(now) - timedelta(days=1))}
    for name, created_at, deleted_at in clusters:
        scope = usage_scope(name, created_at)
        # a deleted cluster only in the months it lived in (no read for the long gone)
        lived = [m for m, start in starts.items() if deleted_at is None or deleted_at >= start]
        months = [m for m in lived if m == current] + (
            [closed]
            if close_due and closed in lived and not usage.closed_month_exported(scope, closed)
            else []
        )
        for month in months:
            totals = usage.month_totals(scope, month)
            meter = spend.get_meter(name, month)
            if not totals and meter is None:
                counts["empty"] += 1
            else:
                body = usage_csv(
                    totals,
                    cluster_spend=meter.month_to_date_usd if meter else Decimal(0),
                    as_of=iso(meter.as_of) if meter else None,
                )
                put_object(object_key(prefix, name, month), body)
                counts["monthToDate" if month == current else "closedMonths"] += 1
            if month == closed:  # an empty closed month is settled too
                usage.mark_closed_month_exported(
                    scope, month, at=now, expires_at=int((now + RETENTION).timestamp())
                )
    logger.info("usage exported", extra=counts)
    return counts
