"""UsageExportFunction's logic (logic/usage_export.py): the Hive-partitioned keys, the CSV's rows adding
up to the cluster's spend, the month to date every day and the closed month once, a day after it ended."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from autopilot.dal.spend import InMemorySpendStore
from autopilot.dal.usage import InMemoryUsageStore
from autopilot.logic.usage_export import COLUMNS, ExportedCluster, export_usage, object_key, usage_csv
from autopilot.logic.usage_ingest import ingest_jobs
from autopilot.models.spend import SpendMeter
from autopilot.models.usage import UNUSED_LINE

from tests.samples import ROOT
from tests.unit.test_usage import job, usage_deps

# Athena DDL reserved words (docs.aws.amazon.com/athena/latest/ug/reserved-words.html) a column could be
ATHENA_DDL_RESERVED = {"user", "date", "time", "timestamp", "partition", "range", "current_date"}


def meter(month: str, usd: str, as_of: datetime) -> SpendMeter:
    return SpendMeter(
        cluster_name="ml-cluster",
        month=month,
        as_of=as_of,
        hourly_rate_usd=Decimal(0),
        month_to_date_usd=Decimal(usd),
        forecast_usd=Decimal(usd),
    )


def test_keys_are_hive_partitions_under_the_prefix() -> None:
    assert object_key("finance/hpc/", "ml-cluster", "2026-11") == (
        "finance/hpc/cluster=ml-cluster/month=2026-11/usage.csv"
    )
    assert object_key("", "ml-cluster", "2026-11") == "cluster=ml-cluster/month=2026-11/usage.csv"


def test_the_rows_and_the_unused_capacity_add_up_to_the_clusters_spend() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    ingest_jobs(
        usage_deps(store),
        "ml-cluster",
        [job("1", gpus=8), job("2", user="bob", gpus=4), job("3", account="chemistry", user="cy", gpus=2)],
        running=[],
        now=datetime(2026, 11, 10, 9, tzinfo=UTC),
    )
    body = usage_csv(store.month_totals("ml-cluster", "2026-11"), cluster_spend=Decimal(300), as_of="t")
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["account"], r["user"]) for r in rows] == [
        ("physics", "ann"),
        ("physics", "bob"),
        ("chemistry", "cy"),
        (UNUSED_LINE, ""),
    ]
    assert sum(Decimal(r["usd"]) for r in rows) == Decimal(300)
    assert {r["cluster_spend_usd"] for r in rows} == {"300.00"}
    assert not {"cluster", "month"} & set(rows[0])  # partition keys: in the path only


def test_every_run_writes_the_month_to_date_and_the_closed_month_once_a_day_after_it_ended() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    spend = InMemorySpendStore()
    spend.put_meter(meter("2026-10", "1000", datetime(2026, 10, 31, 23, 45, tzinfo=UTC)))
    spend.put_meter(meter("2026-11", "20", datetime(2026, 11, 1, 0, 15, tzinfo=UTC)))
    written: dict[str, str] = {}

    def run(at: datetime) -> dict[str, int]:
        return export_usage(
            at,
            [ExportedCluster("ml-cluster", None), ExportedCluster("idle-cluster", None)],
            usage=store,
            spend=spend,
            put_object=written.__setitem__,
            prefix="usage",
        )

    first_night = datetime(2026, 11, 1, 0, 20, tzinfo=UTC)
    assert run(first_night) == {"monthToDate": 1, "closedMonths": 0, "empty": 1}
    assert set(written) == {"usage/cluster=ml-cluster/month=2026-11/usage.csv"}
    assert run(first_night + timedelta(days=1)) == {"monthToDate": 1, "closedMonths": 1, "empty": 2}
    assert "usage/cluster=ml-cluster/month=2026-10/usage.csv" in written
    october = list(csv.DictReader(io.StringIO(written["usage/cluster=ml-cluster/month=2026-10/usage.csv"])))
    assert [(r["account"], r["usd"]) for r in october] == [(UNUSED_LINE, "1000.000000")]
    assert run(first_night + timedelta(days=2)) == {"monthToDate": 1, "closedMonths": 0, "empty": 1}


def test_the_athena_ddl_in_the_docs_reads_the_csvs_columns_with_reserved_words_quoted() -> None:
    docs = (ROOT / "docs/operations.md").read_text()
    ddl = re.search(r"CREATE EXTERNAL TABLE hyperpod_usage \((.*?)\)\s*PARTITIONED", docs, re.S)
    assert ddl is not None
    columns = [c.strip().split()[0] for c in ddl.group(1).split(",") if c.strip() and "(" not in c.split()[0]]
    names = [c.strip("`") for c in columns if not c[0].isdigit()]
    assert names == list(COLUMNS)
    for column in columns:
        if column.strip("`") in ATHENA_DDL_RESERVED:
            assert column.startswith("`"), f"{column}: an Athena DDL reserved word, unquoted"


def test_a_cluster_deleted_mid_month_gets_its_closed_months_csv_and_no_later_month() -> None:
    store = InMemoryUsageStore(["gone"])
    spend = InMemorySpendStore()
    spend.put_meter(
        meter("2026-10", "300", datetime(2026, 10, 15, 12, tzinfo=UTC)).model_copy(
            update={"cluster_name": "gone"}
        )
    )
    written: dict[str, str] = {}
    gone = ExportedCluster("gone", None, deleted_at=datetime(2026, 10, 15, 12, 30, tzinfo=UTC))
    counts = export_usage(
        datetime(2026, 11, 2, 0, 20, tzinfo=UTC),
        [gone],
        usage=store,
        spend=spend,
        put_object=written.__setitem__,
        prefix="usage",
    )
    assert set(written) == {"usage/cluster=gone/month=2026-10/usage.csv"}
    assert counts == {"monthToDate": 0, "closedMonths": 1, "empty": 0}
