"""The spend meter's arithmetic (rate, month to date across runs and months, forecast), its alerts
(once per cluster, month and threshold) and its price cache, on in-memory stores and small fakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any, cast

import pytest
from autopilot import pricing
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.dal.spend import InMemorySpendStore
from autopilot.errors import NotFoundError
from autopilot.logic.read_cost import read_cost
from autopilot.logic.spend_meter import (
    BilledNode,
    accrued,
    advance,
    due_thresholds,
    forecast,
    hourly_rate,
    month_end,
    run_spend_meter,
)
from autopilot.models.records import Cluster, ClusterStatus
from autopilot.models.spend import SpendMeter
from autopilot.pricing import ListPrices, hyperpod_price, price_list_endpoint_region

P5 = "ml.p5.48xlarge"
M5 = "ml.m5.12xlarge"
PRICES = {P5: Decimal("98.32"), M5: Decimal("2.76")}
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TOPIC = "arn:aws:sns:us-east-1:123456789012:alerts"


def _cluster(budget: str | None = "10000.00", name: str = "ml") -> Cluster:
    return Cluster(
        cluster_name=name,
        status=ClusterStatus.ACTIVE,
        created_at="2026-11-01T00:00:00.000Z",
        updated_at="2026-11-01T00:00:00.000Z",
        last_operation_id="op-1",
        owner="ann",
        project="llm",
        budget_limit_usd=budget,
    )


def _nodes(launched: datetime) -> list[BilledNode]:
    return [BilledNode(P5, launched), BilledNode(P5, launched), BilledNode(M5, launched)]


RATE = Decimal("199.40")  # 2 x 98.32 + 2.76


# --- arithmetic ----------------------------------------------------------------------------------


def test_rate_is_the_sum_of_the_list_prices_of_the_billed_nodes() -> None:
    assert hourly_rate(_nodes(NOW), PRICES) == RATE
    assert hourly_rate([BilledNode("ml.unknown.large", NOW)], PRICES) == 0


def test_a_first_run_counts_each_node_from_its_launch() -> None:
    nodes = [BilledNode(P5, NOW - timedelta(hours=2)), BilledNode(M5, NOW - timedelta(minutes=30))]
    assert accrued(nodes, PRICES, since=None, now=NOW) == Decimal("98.32") * 2 + Decimal("2.76") / 2


def test_spend_integrates_across_runs_and_a_retried_run_adds_nothing() -> None:
    first = advance(
        None, _nodes(NOW - timedelta(hours=1)), PRICES, cluster=_cluster(), budget_usd=None, now=NOW
    )
    assert first is not None
    assert first.month_to_date_usd == RATE  # one hour since launch
    later = NOW + timedelta(minutes=15)
    # a node launched between the runs counts from its launch, not from the previous run
    nodes = [*_nodes(NOW - timedelta(hours=1)), BilledNode(P5, NOW + timedelta(minutes=5))]
    second = advance(first, nodes, PRICES, cluster=_cluster(), budget_usd=None, now=later)
    assert second is not None
    expected = RATE + RATE / 4 + Decimal("98.32") * Decimal(10) / Decimal(60)
    assert second.month_to_date_usd == expected.quantize(Decimal("0.000001"))
    assert second.hourly_rate_usd == RATE + Decimal("98.32")
    assert advance(second, nodes, PRICES, cluster=_cluster(), budget_usd=None, now=later) is None


def test_a_new_month_starts_from_zero_at_midnight_utc() -> None:
    end = datetime(2026, 11, 30, 23, 50, tzinfo=UTC)
    november = advance(
        None, _nodes(end - timedelta(days=3)), PRICES, cluster=_cluster(), budget_usd=None, now=end
    )
    assert november is not None
    november.alerted = {80, 100}
    december_now = datetime(2026, 12, 1, 0, 5, tzinfo=UTC)
    december = advance(
        november,
        _nodes(end - timedelta(days=3)),
        PRICES,
        cluster=_cluster(),
        budget_usd=None,
        now=december_now,
    )
    assert december is not None
    assert december.month == "2026-12"
    assert december.month_to_date_usd == (RATE / 12).quantize(Decimal("0.000001"))  # 5 minutes
    assert december.alerted == set()
    # only the month's own hours count, even for nodes launched last month
    assert november.month_to_date_usd == RATE * 72


def test_forecast_is_month_to_date_plus_rate_times_the_hours_left() -> None:
    noon_last_day = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert month_end(noon_last_day) == datetime(2026, 12, 1, tzinfo=UTC)
    assert month_end(datetime(2026, 12, 31, 23, 0, tzinfo=UTC)) == datetime(2027, 1, 1, tzinfo=UTC)
    assert forecast(Decimal(100), Decimal(10), noon_last_day) == Decimal(220)


@pytest.mark.parametrize(
    ("forecast_usd", "alerted", "due"),
    [
        ("7999.99", set(), []),
        ("8000", set(), [80]),
        ("12000", set(), [80, 100]),
        ("12000", {80}, [100]),
        ("12000", {80, 100}, []),
    ],
)
def test_due_thresholds(forecast_usd: str, alerted: set[int], due: list[int]) -> None:
    meter = SpendMeter(
        cluster_name="ml",
        month="2026-11",
        as_of=NOW,
        hourly_rate_usd=Decimal(1),
        month_to_date_usd=Decimal(1),
        forecast_usd=Decimal(forecast_usd),
        budget_usd=Decimal(10000),
        alerted=alerted,
    )
    assert due_thresholds(meter) == due
    assert due_thresholds(meter.model_copy(update={"budget_usd": None})) == []


# --- the run -------------------------------------------------------------------------------------


class FakePaginator:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.calls: list[dict[str, Any]] = []

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        return iter(self.pages)


class FakeSageMaker:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    def get_paginator(self, name: str) -> FakePaginator:
        assert name == "list_cluster_nodes"
        half = len(self.nodes) // 2
        return FakePaginator(
            [{"ClusterNodeSummaries": self.nodes[:half]}, {"ClusterNodeSummaries": self.nodes[half:]}]
        )


class FakeSns:
    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, **kwargs: Any) -> dict[str, str]:
        self.published.append(kwargs)
        return {"MessageId": str(len(self.published))}


def _product(usage: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"usagetype": usage}},
            "terms": {
                "OnDemand": {"T": {"priceDimensions": {"R": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}
            },
        }
    )


class FakePricing:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_paginator(self, name: str) -> FakePaginator:
        assert name == "get_products"
        outer = self

        class Recording(FakePaginator):
            def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
                filters = {f["Field"]: f["Value"] for f in kwargs["Filters"]}
                assert filters["regionCode"] == "us-west-2"
                instance_type = filters["instanceName"]
                outer.asked.append(instance_type)
                price = str(PRICES[instance_type])
                # the training product first: the HyperPod one must be chosen by its usage type
                return iter(
                    [
                        {"PriceList": [_product(f"USW2-Training:{instance_type}", "999")]},
                        {"PriceList": [_product(f"USW2-Cluster:{instance_type}", price)]},
                    ]
                )

        return Recording([])


def _summary(instance_type: str, status: str, launched: datetime, n: int) -> dict[str, Any]:
    return {
        "InstanceId": f"i-{n:017d}",
        "InstanceGroupName": "workers",
        "InstanceType": instance_type,
        "LaunchTime": launched,
        "InstanceStatus": {"Status": status},
    }


@pytest.fixture(autouse=True)
def _fresh_memory() -> Iterator[None]:
    pricing.clear_memory()
    yield
    pricing.clear_memory()


def _run(
    now: datetime,
    store: InMemoryStateStore,
    spend: InMemorySpendStore,
    sns: FakeSns,
    fake_pricing: FakePricing,
) -> dict[str, int]:
    launched = NOW - timedelta(hours=1)
    sagemaker = FakeSageMaker(
        [
            _summary(P5, "Running", launched, 1),
            _summary(P5, "Running", launched, 2),
            _summary(M5, "DeepHealthCheckInProgress", launched, 3),
            _summary(P5, "Pending", launched, 4),  # not billed yet
            _summary(P5, "ShuttingDown", launched, 5),
        ]
    )
    return run_spend_meter(
        now,
        store=store,
        spend=spend,
        prices=ListPrices("us-west-2", spend, pricing=cast(Any, fake_pricing)),
        sagemaker=cast(Any, sagemaker),
        sns=cast(Any, sns),
        alerts_topic_arn=TOPIC,
    )


def test_the_forecast_alert_goes_out_once_per_threshold_and_month(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "HyperPodAutopilot")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "hyperpod-autopilot")  # as the template sets it
    store, spend, sns, fake_pricing = InMemoryStateStore(), InMemorySpendStore(), FakeSns(), FakePricing()
    # 199.40/h from the 20th noon: ~ 52,000 by the month's end, far over a 10,000 budget
    store.clusters["ml"] = _cluster("10000.00")
    store.clusters["other"] = _cluster(None, name="other").model_copy(
        update={"status": ClusterStatus.DELETED}
    )
    first = _run(NOW, store, spend, sns, fake_pricing)
    assert first == {"metered": 1, "unchanged": 0, "gone": 0, "alerts": 2, "failed": 0}
    assert [json.loads(m["Message"])["thresholdPercent"] for m in sns.published] == [80, 100]
    body = json.loads(sns.published[-1]["Message"])
    assert body["hourlyRateUsd"] == "199.40"
    assert body["budgetUsd"] == "10000.00"
    assert body["clusterName"] == "ml"
    assert body["owner"] == "ann"
    assert all(m["TopicArn"] == TOPIC for m in sns.published)
    assert sns.published[0]["Subject"] == "ml: spend forecast 80% of budget"
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    dimensions = [doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0] for doc in emitted]
    assert dimensions == [["ClusterName"], ["Project"]]
    assert emitted[0]["ClusterName"] == "ml"
    assert emitted[1]["Project"] == "llm"
    assert emitted[0]["HourlyRateUsd"] == [199.4]
    assert emitted[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "HyperPodAutopilot"
    # the schedule retried with the same time, then the next run: no alert again, no double spend
    assert _run(NOW, store, spend, sns, fake_pricing)["unchanged"] == 1
    _run(NOW + timedelta(minutes=15), store, spend, sns, fake_pricing)
    assert len(sns.published) == 2
    meter = spend.get_meter("ml", "2026-11")
    assert meter is not None
    assert meter.month_to_date_usd == RATE + RATE / 4


def test_prices_are_fetched_once_then_read_from_memory_or_the_table_until_they_expire() -> None:
    spend, fake_pricing = InMemorySpendStore(), FakePricing()
    prices = ListPrices("us-west-2", spend, pricing=cast(Any, fake_pricing))
    assert prices.price(P5, now=NOW) == PRICES[P5]  # the Cluster product, not the training one
    assert prices.price(P5, now=NOW + timedelta(hours=1)) == PRICES[P5]
    pricing.clear_memory()  # a cold start: the table still has it
    assert ListPrices("us-west-2", spend, pricing=cast(Any, fake_pricing)).price(P5, now=NOW) == PRICES[P5]
    assert fake_pricing.asked == [P5]
    pricing.clear_memory()
    ListPrices("us-west-2", spend, pricing=cast(Any, fake_pricing)).price(
        P5, now=NOW + timedelta(days=1, seconds=1)
    )
    assert fake_pricing.asked == [P5, P5]


def test_hyperpod_price_needs_the_cluster_usage_type() -> None:
    assert hyperpod_price([_product("USE1-Training:ml.p5.48xlarge", "1")], P5) is None
    assert hyperpod_price([_product("Cluster:ml.p5.48xlarge", "98.32")], P5) == Decimal("98.32")


@pytest.mark.parametrize(
    ("region", "endpoint"),
    [
        ("us-west-2", "us-east-1"),
        ("ap-northeast-1", "ap-south-1"),
        ("eu-west-1", "eu-central-1"),
        ("ap-south-1", "ap-south-1"),
    ],
)
def test_the_price_list_endpoint_is_one_aws_serves(region: str, endpoint: str) -> None:
    assert price_list_endpoint_region(region) == endpoint


# --- GET /clusters/{name}/cost -------------------------------------------------------------------


# GET /clusters/{name}/cost as under the default ReadAccess=all (logic/read_access.py)
_EVERYONE_READS = SimpleNamespace(read_access="all")


def test_the_cost_is_zero_with_no_time_before_the_first_run_then_the_meters_figures() -> None:
    store, spend = InMemoryStateStore(), InMemorySpendStore()
    deps = cast(Any, SimpleNamespace(store=store, now=lambda: NOW, settings=_EVERYONE_READS))
    with pytest.raises(NotFoundError):
        read_cost(deps, "ml", spend=spend)
    store.clusters["ml"] = _cluster("2500.00")
    before = read_cost(deps, "ml", spend=spend)
    assert before.model_dump(by_alias=True) == {
        "hourlyRateUsd": 0.0,
        "monthToDateUsd": 0.0,
        "forecastUsd": 0.0,
        "budgetUsd": 2500.0,
        "asOf": None,
    }
    metered = advance(
        None, _nodes(NOW - timedelta(hours=1)), PRICES, cluster=_cluster(), budget_usd=None, now=NOW
    )
    assert metered is not None
    spend.put_meter(metered)
    after = read_cost(deps, "ml", spend=spend)
    assert (after.hourly_rate_usd, after.month_to_date_usd, after.budget_usd) == (199.4, 199.4, 2500.0)
    assert after.model_dump(mode="json", by_alias=True)["asOf"] == "2026-11-20T12:00:00.000Z"  # records.iso


def test_the_cost_in_a_month_the_meter_has_not_run_in_yet_counts_nothing_of_the_last() -> None:
    store, spend = InMemoryStateStore(), InMemorySpendStore()
    store.clusters["ml"] = _cluster("2500.00")
    late_october = datetime(2026, 10, 31, 23, 50, tzinfo=UTC)
    metered = advance(
        None,
        _nodes(late_october - timedelta(hours=10)),
        PRICES,
        cluster=_cluster(),
        budget_usd=None,
        now=late_october,
    )
    assert metered is not None
    assert metered.month_to_date_usd > 0
    spend.put_meter(metered)
    first_of_november = datetime(2026, 11, 1, 0, 5, tzinfo=UTC)
    deps = cast(Any, SimpleNamespace(store=store, now=lambda: first_of_november, settings=_EVERYONE_READS))

    cost = read_cost(deps, "ml", spend=spend)

    hours_left = Decimal(30 * 24 * 60 - 5) / 60
    assert cost.month_to_date_usd == 0.0
    assert cost.hourly_rate_usd == 199.4
    assert cost.forecast_usd == float((RATE * hours_left).quantize(Decimal("0.01")))
    assert cost.model_dump(mode="json", by_alias=True)["asOf"] == "2026-10-31T23:50:00.000Z"
