"""Chargeback (issue 25): pricing a finished job (GPU shares, CPU nodes, month splits), counting each
job once however often it is reported (the in-memory store and the state table in moto, its
transactions and their 100-item limit), the usage report's lines adding up to the cluster's spend,
and the department budgets' one alert per threshold and month."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from autopilot.dal.usage import (
    MAX_TRANSACTION_ITEMS,
    InMemoryUsageStore,
    UnprocessedKeysError,
    UsageTable,
    _next_batch,
)
from autopilot.logic.account_budget_alerts import crossed, running_jobs
from autopilot.logic.usage_ingest import UsageDeps, ingest_jobs
from autopilot.logic.usage_pricing import NodeRate, month_spans, price_job, vcpus_for
from autopilot.logic.usage_report import build_view
from autopilot.models.agent import FinishedJob, SlurmNode
from autopilot.models.usage import UNUSED_LINE, AccountBudgetsBody, UsageBy
from botocore.exceptions import ClientError
from moto import mock_aws
from pydantic import ValidationError

from tests.samples.state_table import create_state_table

T0 = datetime(2026, 11, 10, 8, 0, tzinfo=UTC)
# the jobs' default start: they ended before T0, the reports' now (a job ending after now is refused)
START = T0 - timedelta(days=1)
GPU_NODE = NodeRate("ml.p5.48xlarge", Decimal("98.32"), 8)
CPU_NODE = NodeRate("ml.m5.xlarge", Decimal("0.23"), 0)
RATES = {"ip-10-0-0-1": GPU_NODE, "ip-10-0-0-2": GPU_NODE, "ip-10-0-1-1": CPU_NODE}
TYPES = {"ip-10-0-0-1": "ml.p5.48xlarge", "ip-10-0-0-2": "ml.p5.48xlarge", "ip-10-0-1-1": "ml.m5.xlarge"}
PRICES = {"ml.p5.48xlarge": Decimal("98.32"), "ml.m5.xlarge": Decimal("0.23")}


def job(
    job_id: str = "101",
    *,
    account: str = "physics",
    user: str = "ann",
    nodes: tuple[str, ...] = ("ip-10-0-0-1",),
    gpus: int = 8,
    start: datetime = START,
    hours: float = 1,
) -> FinishedJob:
    return FinishedJob(
        job_id=job_id,
        account=account,
        user=user,
        partition="gpu",
        nodes=list(nodes),
        gpus=gpus,
        start=start,
        end=start + timedelta(hours=hours),
    )


# --- pricing ---------------------------------------------------------------------------------------


def test_a_job_holding_all_of_a_nodes_gpus_pays_the_whole_node() -> None:
    cost = price_job(job(gpus=8, hours=2), RATES)
    assert cost.usd == Decimal("196.64")
    assert cost.gpu_hours == Decimal(16)
    assert cost.months.keys() == {"2026-11"}


def test_a_node_is_shared_by_its_gpus() -> None:
    cost = price_job(job(gpus=2, hours=1), RATES)
    assert cost.usd == Decimal("24.58")  # 2 of 8 GPUs: a quarter of 98.32
    assert cost.gpu_hours == Decimal(2)


def test_a_multi_node_jobs_gpus_are_spread_over_its_nodes() -> None:
    cost = price_job(job(nodes=("ip-10-0-0-1", "ip-10-0-0-2"), gpus=8, hours=1), RATES)
    assert cost.usd == Decimal("98.32")  # 4 of 8 on each of two nodes
    assert cost.node_count == 2


def test_more_gpus_than_a_node_has_pay_the_whole_node_at_most() -> None:
    assert price_job(job(gpus=16, hours=1), RATES).usd == Decimal("98.32")


def test_a_cpu_node_is_paid_whole_and_gives_no_gpu_hours() -> None:
    cost = price_job(job(nodes=("ip-10-0-1-1",), gpus=0, hours=3), RATES)
    assert cost.usd == Decimal("0.69")
    assert cost.gpu_hours == 0


def test_a_job_without_gpus_on_a_gpu_node_pays_nothing_for_it() -> None:
    assert price_job(job(gpus=0, hours=3), RATES).usd == 0


def test_jobs_sharing_a_cpu_node_share_its_price_by_their_allocated_cpus() -> None:
    rates = {"ip-10-0-1-1": NodeRate("ml.m5.xlarge", Decimal("0.24"), 0, vcpus_for("ml.m5.xlarge"))}
    two = [job(n, nodes=("ip-10-0-1-1",), gpus=0, hours=1).model_copy(update={"cpus": 2}) for n in "12"]
    costs = [price_job(j, rates) for j in two]
    assert [c.usd for c in costs] == [Decimal("0.12"), Decimal("0.12")]  # 2 of 4 vCPUs each: the node once


def test_a_job_on_a_gpu_node_without_gres_pays_its_cpus_share() -> None:
    rates = {"ip-10-0-0-1": NodeRate("ml.p5.48xlarge", Decimal("98.32"), 8, vcpus_for("ml.p5.48xlarge"))}
    cpu_only = job(gpus=0, hours=1).model_copy(update={"cpus": 96})
    assert price_job(cpu_only, rates).usd == Decimal("49.16")  # 96 of 192 vCPUs


def test_the_cpus_reach_the_price_through_the_ingest() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    cpu_job = FinishedJob.model_validate(
        {**job(nodes=("ip-10-0-1-1",), gpus=0, hours=4).model_dump(by_alias=True, mode="json"), "cpus": 1}
    )
    ingest_jobs(usage_deps(store), "ml-cluster", [cpu_job], running=[], now=T0)
    assert sum(t.usd for t in store.month_totals("ml-cluster", "2026-11")) == Decimal("0.23")  # 1 of 4


@pytest.mark.parametrize(
    ("instance_type", "vcpus"),
    [("ml.c5.large", 2), ("ml.m5.xlarge", 4), ("ml.p5.48xlarge", 192), ("ml.t3.medium", None)],
)
def test_vcpus_follow_ec2s_size_names(instance_type: str, vcpus: int | None) -> None:
    assert vcpus_for(instance_type) == vcpus


def test_a_job_over_a_months_end_is_split_by_time_and_counts_in_the_month_it_ended() -> None:
    start = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    cost = price_job(job(gpus=8, start=start, hours=3), RATES)
    assert cost.months["2026-11"].usd == Decimal("98.32")
    assert cost.months["2026-12"].usd == Decimal("196.64")
    assert cost.usd == Decimal("294.96")
    assert cost.ended_month == "2026-12"


def test_month_spans_cross_a_year_end() -> None:
    spans = list(month_spans(datetime(2026, 12, 31, 12, tzinfo=UTC), datetime(2027, 1, 1, 6, tzinfo=UTC)))
    assert spans == [("2026-12", Decimal(12)), ("2027-01", Decimal(6))]


def test_a_node_without_a_rate_adds_nothing_and_is_named() -> None:
    cost = price_job(job(nodes=("ip-10-0-0-1", "ip-10-9-9-9"), gpus=16, hours=1), RATES)
    assert cost.usd == Decimal("98.32")
    assert cost.unpriced_nodes == ["ip-10-9-9-9"]
    no_price = price_job(job(gpus=8), {"ip-10-0-0-1": NodeRate("ml.p5.48xlarge", None, 8)})
    assert no_price.usd == 0
    assert no_price.unpriced_nodes == ["ip-10-0-0-1"]


# --- ingest: once per job ----------------------------------------------------------------------------


class Prices:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def price(self, instance_type: str, *, now: datetime) -> Decimal | None:
        self.asked.append(instance_type)
        return PRICES.get(instance_type)


class Sns:
    def __init__(self, *, fail: bool = False) -> None:
        self.published: list[dict[str, Any]] = []
        self.fail = fail

    def publish(self, **kwargs: Any) -> dict[str, str]:
        if self.fail:
            raise ClientError({"Error": {"Code": "Throttled", "Message": "slow down"}}, "Publish")
        self.published.append(kwargs)
        return {"MessageId": str(len(self.published))}


def usage_deps(store: Any, sns: Sns | None = None) -> UsageDeps:
    topic = Sns() if sns is None else sns
    return UsageDeps(
        usage=store,
        prices=Prices(),
        node_types=lambda _: dict(TYPES),
        sns=lambda: topic,  # type: ignore[arg-type,return-value]
        alerts_topic_arn="arn:aws:sns:us-east-1:123456789012:alerts",
        cluster_tags=lambda _: ("ann", "climate"),
    )


def test_the_same_report_twice_counts_once() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    deps = usage_deps(store)
    jobs = [job("1", gpus=8), job("2", user="bob", gpus=4)]
    first = ingest_jobs(deps, "ml-cluster", jobs, running=[], now=T0)
    again = ingest_jobs(deps, "ml-cluster", jobs, running=[], now=T0)
    assert (first.counted, first.skipped) == (2, 0)
    assert (again.counted, again.skipped) == (0, 2)
    totals = store.month_totals("ml-cluster", "2026-11")
    assert sum(t.usd for t in totals) == Decimal("147.48")
    assert sum(t.jobs for t in totals) == 2


def test_a_job_twice_in_one_report_counts_once() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    result = ingest_jobs(usage_deps(store), "ml-cluster", [job("7"), job("7")], running=[], now=T0)
    assert result.counted == 1
    assert sum(t.jobs for t in store.month_totals("ml-cluster", "2026-11")) == 1


def test_a_failure_midway_loses_nothing_and_double_counts_nothing_on_the_resend() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    store.fail_after = 1
    jobs = [job("1"), job("2"), job("3")]
    with pytest.raises(RuntimeError):
        ingest_jobs(usage_deps(store), "ml-cluster", jobs, running=[], now=T0)
    store.fail_after = None
    resent = ingest_jobs(usage_deps(store), "ml-cluster", jobs, running=[], now=T0)
    assert (resent.counted, resent.skipped) == (2, 1)
    assert sum(t.jobs for t in store.month_totals("ml-cluster", "2026-11")) == 3


def test_a_report_of_jobs_all_counted_prices_nothing() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    deps = usage_deps(store)
    ingest_jobs(deps, "ml-cluster", [job("1")], running=[], now=T0)
    prices = Prices()
    deps.prices = prices
    ingest_jobs(deps, "ml-cluster", [job("1")], running=[], now=T0)
    assert prices.asked == []


@pytest.fixture
def table() -> Any:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(dynamodb)
        dynamodb.put_item(
            TableName="state",
            Item={
                "pk": {"S": "CLUSTER#ml-cluster"},
                "sk": {"S": "CLUSTER#ml-cluster"},
                "kind": {"S": "CLUSTER"},
            },
        )
        yield UsageTable("state", dynamodb=dynamodb)


def test_the_state_table_counts_a_resent_report_once(table: UsageTable) -> None:
    deps = usage_deps(table)
    jobs = [job(str(n), user=f"user{n}", gpus=1) for n in range(150)]  # 300 items: three transactions
    assert ingest_jobs(deps, "ml-cluster", jobs, running=[], now=T0).counted == 150
    assert ingest_jobs(deps, "ml-cluster", jobs, running=[], now=T0).counted == 0
    totals = table.month_totals("ml-cluster", "2026-11")
    assert len(totals) == 150
    assert sum(t.jobs for t in totals) == 150
    assert sum(t.usd for t in totals) == Decimal("12.29") * 150


def test_a_job_counted_meanwhile_cancels_its_transaction_which_is_retried_without_it(
    table: UsageTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = usage_deps(table)
    ingest_jobs(deps, "ml-cluster", [job("2")], running=[], now=T0)
    # another invocation of the same report counted job 2 between this one's read and its write
    real = table.known_jobs
    calls = iter([set(), None])

    def stale_then_real(cluster: str, ids: Any) -> set[str]:
        seen = next(calls, None)
        return seen if seen is not None else real(cluster, ids)

    monkeypatch.setattr(table, "known_jobs", stale_then_real)
    result = ingest_jobs(deps, "ml-cluster", [job("1"), job("2"), job("3")], running=[], now=T0)
    assert result.counted == 2
    totals = table.month_totals("ml-cluster", "2026-11")
    assert sum(t.jobs for t in totals) == 3
    assert sum(t.usd for t in totals) == Decimal("98.32") * 3


def test_a_cluster_created_again_under_its_name_and_a_restarted_job_id_count_afresh(
    table: UsageTable,
) -> None:
    deps = usage_deps(table)
    deps.created_at = lambda _: datetime(2026, 11, 1, tzinfo=UTC)
    assert ingest_jobs(deps, "ml-cluster", [job("1", gpus=8)], running=[], now=T0).counted == 1
    # Slurm lost its state: job ids restart, job 1 is a new job (another start)
    later = job("1", gpus=8, start=START + timedelta(hours=2))
    assert ingest_jobs(deps, "ml-cluster", [later], running=[], now=T0).counted == 1
    old_scope = "ml-cluster@2026-11-01T00:00:00.000Z"  # the registry's createdAt as stored
    assert sum(t.jobs for t in table.month_totals(old_scope, "2026-11")) == 2
    # the cluster deleted and created again under the same name: its Slurm starts at job 1 again
    deps.created_at = lambda _: datetime(2026, 11, 15, tzinfo=UTC)
    again = job("1", gpus=4)
    assert ingest_jobs(deps, "ml-cluster", [again], running=[], now=T0).counted == 1
    new = table.month_totals("ml-cluster@2026-11-15T00:00:00.000Z", "2026-11")
    assert [(t.jobs, t.usd) for t in new] == [(1, Decimal("49.16"))]  # not merged with the old one's
    assert sum(t.usd for t in table.month_totals(old_scope, "2026-11")) == Decimal("98.32") * 2


def test_a_transaction_never_holds_more_than_dynamodbs_limit() -> None:
    costs = [
        price_job(job(str(n), user=f"u{n}", start=datetime(2026, 11, 30, 23, tzinfo=UTC), hours=2), RATES)
        for n in range(80)
    ]
    batch, rest = _next_batch(costs)
    # each job: its put and two months' totals of its own user
    assert len(batch) + 2 * len(batch) <= MAX_TRANSACTION_ITEMS < len(batch) + 1 + 2 * (len(batch) + 1)
    assert len(batch) + len(rest) == 80


def test_a_transaction_stays_under_dynamodbs_4_mb() -> None:
    many = tuple(f"ip-10-9-{n // 250}-{n % 250}" for n in range(5_000))  # unknown: all named unpriced
    costs = [price_job(job(str(n), nodes=many, gpus=0), RATES) for n in range(50)]
    batch, rest = _next_batch(costs)
    assert sum(len(c.model_dump_json(by_alias=True)) for c in batch) < 4_000_000
    assert batch
    assert len(batch) + len(rest) == 50


def test_a_job_that_cannot_be_stored_is_refused_alone_and_the_others_counted(table: UsageTable) -> None:
    deps = usage_deps(table)
    eight_years = job("2", start=T0 - timedelta(days=8 * 365), hours=8 * 365 * 24)  # 97 months
    result = ingest_jobs(deps, "ml-cluster", [job("1"), eight_years, job("3")], running=[], now=T0)
    assert (result.counted, result.skipped) == (2, 0)
    assert [(r["jobId"], r["reason"].split(":")[0]) for r in result.rejected] == [("2", "jobs[1].start")]
    assert sum(t.jobs for t in table.month_totals("ml-cluster", "2026-11")) == 2


def test_a_counted_jobs_item_holds_its_start_and_end_as_the_tables_iso_text(table: UsageTable) -> None:
    # the priced job holds datetimes; the DAL's edge spells them as every stored time (records.iso)
    start = START + timedelta(microseconds=123456)
    ingest_jobs(usage_deps(table), "ml-cluster", [job("9", start=start, hours=2)], running=[], now=T0)

    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    (item,) = dynamodb.query(
        TableName="state",
        KeyConditionExpression="pk = :pk AND begins_with(sk, :job)",
        ExpressionAttributeValues={":pk": {"S": "CLUSTER#ml-cluster"}, ":job": {"S": "USAGEJOB#"}},
    )["Items"]
    assert (item["start"], item["end"]) == (
        {"S": "2026-11-09T08:00:00.123Z"},
        {"S": "2026-11-09T10:00:00.123Z"},
    )
    assert item["sk"] == {"S": f"USAGEJOB#9@{int(start.timestamp())}"}


# --- department budgets ------------------------------------------------------------------------------


def test_thresholds_crossed() -> None:
    assert crossed(Decimal(49), Decimal(100)) == []
    assert crossed(Decimal(80), Decimal(100)) == [50, 80]
    assert crossed(Decimal(250), Decimal(100)) == [50, 80, 100]


def budgeted(store: InMemoryUsageStore, usd: str) -> None:
    store.budgets["ml-cluster"] = {"physics": usd}


def test_crossing_80_percent_gives_one_alert_per_threshold_and_none_on_a_resend() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    budgeted(store, "200.00")
    sns = Sns()
    deps = usage_deps(store, sns)
    running = [SlurmNode(name="ip-10-0-0-1", state="ALLOCATED", jobs=["12", "9"])]
    ingest_jobs(deps, "ml-cluster", [job("1", hours=1)], running=running, now=T0)  # 49 %
    assert sns.published == []
    jobs = [job("1", hours=1), job("2", user="bob", hours=0.7)]  # 83.6 %
    ingest_jobs(deps, "ml-cluster", jobs, running=running, now=T0)
    ingest_jobs(deps, "ml-cluster", jobs, running=running, now=T0)
    assert [json.loads(p["Message"])["thresholdPercent"] for p in sns.published] == [50, 80]
    alert = json.loads(sns.published[1]["Message"])
    assert alert["kind"] == "AccountBudgetThresholdCrossed"
    assert alert["account"] == "physics"
    assert alert["budgetUsd"] == "200.00"
    assert [u["user"] for u in alert["topUsers"]] == ["ann", "bob"]
    assert alert["runningJobs"] == ["9", "12"]
    assert alert["owner"] == "ann"


def test_an_account_without_a_budget_is_never_alerted() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    budgeted(store, "1.00")
    sns = Sns()
    ingest_jobs(usage_deps(store, sns), "ml-cluster", [job("1", account="chemistry")], running=[], now=T0)
    assert sns.published == []


@pytest.mark.parametrize("kind", ["memory", "table"])
def test_an_alert_sns_refused_is_sent_when_the_report_comes_again(kind: str, table: UsageTable) -> None:
    store: Any = InMemoryUsageStore(["ml-cluster"]) if kind == "memory" else table
    if kind == "memory":
        store.budgets["ml-cluster"] = {"physics": "100.00"}
    else:
        table.set_account_budgets(
            "ml-cluster", {"physics": "100.00"}, updated_at=datetime(2026, 11, 10, 8, tzinfo=UTC)
        )
    deleted: list[Any] = []
    table.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.DeleteItem", lambda params, **_: deleted.append(params)
    )
    with pytest.raises(Exception, match="slow down"):
        ingest_jobs(usage_deps(store, Sns(fail=True)), "ml-cluster", [job("1")], running=[], now=T0)
    sns = Sns()
    # the resend, at once: the claim SNS refused is taken again without waiting for its lease
    ingest_jobs(usage_deps(store, sns), "ml-cluster", [job("1")], running=[], now=T0)
    assert [json.loads(p["Message"])["thresholdPercent"] for p in sns.published] == [50, 80]
    assert deleted == []  # released by UpdateItem: AgentFunction has no DeleteItem on the table


def test_account_budgets_name_the_bad_field() -> None:
    with pytest.raises(ValidationError, match="not a Slurm account name"):
        AccountBudgetsBody.model_validate({"accountBudgets": {"bad name": 10}})
    with pytest.raises(ValidationError, match=r"at least 0\.01"):
        AccountBudgetsBody.model_validate({"accountBudgets": {"physics": 0}})
    with pytest.raises(ValidationError, match=r"at least 0\.01"):
        AccountBudgetsBody.model_validate({"accountBudgets": {"physics": 0.001}})  # would be stored as 0.00
    body = AccountBudgetsBody.model_validate({"accountBudgets": {"physics": 5000}})
    assert body.account_budgets == {"physics": 5000}


@pytest.mark.parametrize(
    "parse",
    [
        AccountBudgetsBody.model_validate_json,
        lambda raw: AccountBudgetsBody.model_validate(json.loads(raw)),
    ],
)
def test_a_budget_of_json_true_is_refused_not_taken_for_one_dollar(parse: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        parse('{"accountBudgets": {"physics": true}}')
    [error] = refused.value.errors()
    assert error["loc"] == ("accountBudgets", "physics")


def test_running_jobs_are_distinct_in_id_order() -> None:
    nodes = [
        SlurmNode(name="a", state="MIXED", jobs=["10", "2"]),
        SlurmNode(name="b", state="IDLE", jobs=["2"]),
    ]
    assert running_jobs(nodes) == ["2", "10"]


# --- the usage report --------------------------------------------------------------------------------


def test_lines_and_unused_capacity_add_up_to_the_clusters_spend() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    ingest_jobs(
        usage_deps(store),
        "ml-cluster",
        [job("1", gpus=8), job("2", user="bob", gpus=4), job("3", account="chemistry", user="cy", gpus=2)],
        running=[],
        now=T0,
    )
    totals = store.month_totals("ml-cluster", "2026-11")
    view = build_view(
        "ml-cluster",
        "2026-11",
        UsageBy.ACCOUNT,
        totals,
        cluster_spend=Decimal(300),
        as_of=T0,
        budgets={"physics": "500.00"},
    )
    assert [line.name for line in view.lines] == ["physics", "chemistry", UNUSED_LINE]
    assert view.lines[0].usd == 147.48
    assert view.lines[0].budget_usd == 500.0
    assert view.lines[-1].usd == 127.94
    assert sum(line.usd for line in view.lines) == pytest.approx(300)
    assert view.total_usd == 300
    assert view.warnings == []
    # the meter's time, a datetime inside, answers in the API's one time spelling (records.iso)
    assert view.model_dump(mode="json", by_alias=True)["asOf"] == "2026-11-10T08:00:00.000Z"
    by_user = build_view(
        "ml-cluster", "2026-11", UsageBy.USER, totals, cluster_spend=Decimal(300), as_of=None, budgets={}
    )
    assert [line.name for line in by_user.lines] == ["ann", "bob", "cy", UNUSED_LINE]


def test_jobs_costing_more_than_the_meter_counted_leave_no_negative_unused_line_and_a_warning() -> None:
    store = InMemoryUsageStore(["ml-cluster"])
    ingest_jobs(usage_deps(store), "ml-cluster", [job("1", gpus=8)], running=[], now=T0)
    view = build_view(
        "ml-cluster",
        "2026-11",
        UsageBy.ACCOUNT,
        store.month_totals("ml-cluster", "2026-11"),
        cluster_spend=Decimal(50),
        as_of=None,
        budgets={},
    )
    assert view.lines[-1].usd == 0
    assert view.total_usd == 98.32
    assert "48.32 more than the spend meter counted" in view.warnings[0]


def test_keys_dynamodb_keeps_leaving_unread_fail_the_report_rather_than_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Throttled:
        calls = 0

        def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
            self.calls += 1
            return {"Responses": {}, "UnprocessedKeys": RequestItems}

    monkeypatch.setattr("autopilot.dal.usage.time.sleep", lambda _: None)
    client = Throttled()
    with pytest.raises(UnprocessedKeysError):
        UsageTable("state", dynamodb=client).known_jobs("ml-cluster", ["1", "2"])  # type: ignore[arg-type]
    assert client.calls == 6


@pytest.mark.parametrize("kind", ["memory", "table"])
def test_the_usage_report_warns_of_jobs_on_nodes_that_could_not_be_priced(
    kind: str, table: UsageTable
) -> None:
    store: Any = InMemoryUsageStore(["ml-cluster"]) if kind == "memory" else table
    deps = usage_deps(store)
    jobs = [
        job("1"),
        job("2", nodes=("ip-10-0-0-1", "ip-10-9-9-9"), gpus=16),
        job("3", nodes=("ip-10-9-9-8",)),
    ]
    ingest_jobs(deps, "ml-cluster", jobs, running=[], now=T0)
    totals = store.month_totals("ml-cluster", "2026-11")
    view = build_view(
        "ml-cluster", "2026-11", UsageBy.ACCOUNT, totals, cluster_spend=Decimal(500), as_of=None, budgets={}
    )
    assert [w.split(" ")[0] for w in view.warnings] == ["2"]
    assert "could not be priced" in view.warnings[0]


@pytest.mark.parametrize("kind", ["memory", "table"])
def test_a_node_replaced_before_its_jobs_report_is_priced_as_an_earlier_listing_had_it(
    kind: str, table: UsageTable
) -> None:
    store: Any = InMemoryUsageStore(["ml-cluster"]) if kind == "memory" else table
    listed = dict(TYPES)
    deps = usage_deps(store)
    deps.node_types = lambda _: dict(listed)
    ingest_jobs(deps, "ml-cluster", [job("1")], running=[], now=T0)
    del listed["ip-10-0-0-1"]  # replaced by healing: SageMaker lists it no more
    replaced = ingest_jobs(
        deps, "ml-cluster", [job("2", start=START + timedelta(hours=1))], running=[], now=T0
    )
    never_seen = ingest_jobs(deps, "ml-cluster", [job("3", nodes=("ip-10-9-9-9",))], running=[], now=T0)
    assert replaced.unpriced_nodes == 0
    assert never_seen.unpriced_nodes == 1
    assert sum(t.usd for t in store.month_totals("ml-cluster", "2026-11")) == Decimal("196.64")


@pytest.mark.parametrize("kind", ["memory", "table"])
def test_an_alert_claimed_by_an_invocation_that_died_is_published_by_a_later_report(
    kind: str, table: UsageTable
) -> None:
    store: Any = InMemoryUsageStore(["ml-cluster"]) if kind == "memory" else table
    store.set_account_budgets("ml-cluster", {"physics": "100.00"}, updated_at=T0)
    # the invocation that counted physics' job 1 claimed the 50 % and 80 % alerts, then died
    store.record_jobs("ml-cluster", [price_job(job("1"), RATES)], now=T0)
    for threshold in (50, 80):
        assert store.claim_account_alert("ml-cluster", "2026-11", "physics", threshold, now=T0, expires_at=0)
    sns = Sns()
    deps = usage_deps(store, sns)
    chemistry = [job("2", account="chemistry", gpus=1)]  # later reports carry other accounts' jobs

    ingest_jobs(deps, "ml-cluster", chemistry, running=[], now=T0 + timedelta(seconds=30))
    assert sns.published == []  # within the lease: the claims' own invocation may still publish
    ingest_jobs(deps, "ml-cluster", chemistry, running=[], now=T0 + timedelta(minutes=5))
    assert [json.loads(p["Message"])["thresholdPercent"] for p in sns.published] == [50, 80]
    ingest_jobs(deps, "ml-cluster", chemistry, running=[], now=T0 + timedelta(minutes=9))
    assert len(sns.published) == 2  # published: never again
