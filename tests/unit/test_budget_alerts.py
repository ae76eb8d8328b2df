"""BudgetAlertsFunction: AWS Budgets' message parsed as AWS sends it, one alert per (budget, threshold,
period) whatever the number of notifications, the alert's figures, and the enforcement modes.

The state table is moto's DynamoDB (the DAL's conditional writes are what dedupe); Budgets, SageMaker,
SNS and EventBridge are small fakes that record the calls made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from autopilot.dal.budget_alerts import AlertKey, BudgetAlertTable, ClaimResult
from autopilot.dal.spend import InMemorySpendStore
from autopilot.dal.state_table import StateTable
from autopilot.errors import NotFoundError
from autopilot.logic import budget_alerts
from autopilot.logic.authorize_delete import NotAllowedError
from autopilot.logic.budget_alert_retry import retry_unfinished
from autopilot.logic.budget_alerts import (
    AlertInFlightError,
    BudgetAlertDeps,
    Handled,
    budget_period,
    handle_notification,
    spend_meter_rate,
)
from autopilot.logic.budget_enforcement import (
    GrowthBlockedError,
    ensure_growth_allowed,
    scale_to_min_groups,
    worker_groups,
)
from autopilot.logic.lift_growth_block import lift_growth_block
from autopilot.models.budget_alerts import NotABudgetNotificationError, parse_budget_notification
from autopilot.models.records import Cluster, ClusterStatus, OperationStatus, OperationType
from autopilot.models.spend import SpendMeter
from autopilot.settings import BudgetAlertsSettings
from autopilot_config.models.cluster_config import (
    ClusterInstanceGroupSpecification,
    ClusterSlurmConfig,
    CreateClusterRequest,
)
from autopilot_config.models.provisioning import ProvisioningParameters
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator
from moto import mock_aws

from sandbox.emulator.deploy import load_template
from sandbox.services.budgets import budget_message
from tests.samples import load_event
from tests.samples.state_table import create_state_table

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
TABLE = "state"
ACCOUNT = "123456789012"
ALERTS = f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"
API_URL = "https://abc123.execute-api.us-east-1.amazonaws.com/dev"
NOW = datetime(2026, 11, 10, 8, 1, tzinfo=UTC)
EVENT_MESSAGE = str(load_event("budgets/sns_notification.json")["Records"][0]["Sns"]["Message"])

# Real deliveries, as captured (a Lambda's logged SNS record of 2023; a test fixture of 2022).
DAILY_2023 = (
    "AWS Budget Notification March 05, 2023\nAWS Account 265627204426\n\nDear AWS Customer,\n\n"
    "You requested that we alert you when the ACTUAL Cost associated with your killswitch budget is greater "
    "than $0.75 per day. Yesterday, the ACTUAL Cost associated with this budget is $1.70. You can find "
    "additional details below and by accessing the AWS Budgets dashboard [1].\n\nBudget Name: killswitch\n"
    "Budget Type: Cost\nBudgeted Amount: $5.00\nAlert Type: ACTUAL\nAlert Threshold: > $0.75\n"
    "ACTUAL Amount: $1.70\n\n[1] https://console.aws.amazon.com/billing/home#/budgets\n"
)
MONTHLY_2022 = (
    "AWS Budget Notification September 26, 2022\nAWS Account 017790921725\n\nDear AWS Customer,\n\n"
    "You requested that we alert you when the ACTUAL Cost associated with your Test Budget budget is greater "
    "than $0.16 for the current month. The ACTUAL Cost associated with this budget is $0.59. You can find "
    "additional details below and by accessing the AWS Budgets dashboard [1].\n\nBudget Name: Test Budget\n"
    "Budget Type: Cost\nBudgeted Amount: $0.20\nAlert Type: ACTUAL\nAlert Threshold: > $0.16\n"
    "ACTUAL Amount: $0.59\n\n[1] https://console.aws.amazon.com/billing/home#/budgets\n"
)


# -- the parser --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "name", "alert_type", "threshold", "budgeted", "amount", "percent", "day"),
    [
        (DAILY_2023, "killswitch", "ACTUAL", "0.75", "5.00", "1.70", Decimal(15), date(2023, 3, 5)),
        (MONTHLY_2022, "Test Budget", "ACTUAL", "0.16", "0.20", "0.59", Decimal(80), date(2022, 9, 26)),
        (
            EVENT_MESSAGE,
            "hyperpod-ml-cluster",
            "ACTUAL",
            "2000",
            "2500",
            "2148.37",
            Decimal(80),
            date(2026, 11, 10),
        ),
        # CRLF line ends, whole-dollar amounts (a FORECASTED delivery of 2020, as forwarded by e-mail)
        (
            "AWS Budget Notification May 04, 2020\r\nAWS Account 123456789012\r\n\r\n"
            "Budget Name: Development EC2 Monthly Budget\r\nBudget Type: Cost\r\n"
            "Budgeted Amount: $10\r\nAlert Type: FORECASTED\r\n"
            "Alert Threshold: > $10\r\nFORECASTED Amount: $15.00 \r\n",
            "Development EC2 Monthly Budget",
            "FORECASTED",
            "10",
            "10",
            "15",
            Decimal(100),
            date(2020, 5, 4),
        ),
    ],
)
def test_parses_what_aws_budgets_sends(
    message: str,
    name: str,
    alert_type: str,
    threshold: str,
    budgeted: str,
    amount: str,
    percent: Decimal,
    day: date,
) -> None:
    parsed = parse_budget_notification(message)

    assert parsed.budget_name == name
    assert parsed.alert_type == alert_type
    assert parsed.comparison == "GREATER_THAN"
    assert parsed.threshold_usd == Decimal(threshold)
    assert parsed.budgeted_usd == Decimal(budgeted)
    assert parsed.amount_usd == Decimal(amount)
    assert parsed.threshold_percent == percent
    assert parsed.notified_on == day


def test_parses_the_sandbox_simulators_message_too() -> None:
    _, message = budget_message(
        budget={"BudgetName": "hyperpod-x", "BudgetLimit": {"Amount": "333.33", "Unit": "USD"}},
        notification={
            "NotificationType": "FORECASTED",
            "ComparisonOperator": "GREATER_THAN",
            "Threshold": 80,
        },
        threshold_amount=Decimal("266.664"),
        value=Decimal("1234.5"),
        account_id=ACCOUNT,
        at=NOW,
    )

    parsed = parse_budget_notification(message)

    assert (parsed.alert_type, parsed.threshold_usd, parsed.amount_usd) == (
        "FORECASTED",
        Decimal("266.66"),
        Decimal("1234.50"),
    )
    assert parsed.threshold_percent == Decimal(80)  # $266.66 of $333.33 rounds back to 80 %


@pytest.mark.parametrize(
    ("message", "missing"),
    [
        ('{"AlarmName": "x", "NewStateValue": "ALARM"}', "budget name"),
        (EVENT_MESSAGE.replace("Alert Type: ACTUAL", "Alert Type: USAGE"), "not ACTUAL or FORECASTED"),
        (EVENT_MESSAGE.replace("ACTUAL Amount: $2,148.37\n", ""), "'ACTUAL Amount'"),
        (EVENT_MESSAGE.replace("> $2,000.00", "$2,000.00"), "no comparison"),
        (EVENT_MESSAGE.replace("$2,500.00", "lots"), "not an amount"),
    ],
)
def test_what_is_not_a_budgets_notification_is_named(message: str, missing: str) -> None:
    with pytest.raises(NotABudgetNotificationError, match=missing):
        parse_budget_notification(message)


@pytest.mark.parametrize(
    ("unit", "key", "end"),
    [
        ("MONTHLY", "2026-11", datetime(2026, 12, 1, tzinfo=UTC)),
        ("DAILY", "2026-11-10", datetime(2026, 11, 11, tzinfo=UTC)),
        ("QUARTERLY", "2026-Q4", datetime(2027, 1, 1, tzinfo=UTC)),
        ("ANNUALLY", "2026", datetime(2027, 1, 1, tzinfo=UTC)),
    ],
)
def test_budget_periods(unit: str, key: str, end: datetime) -> None:
    period = budget_period(unit, date(2026, 11, 10))
    assert (period.key, period.end) == (key, end)


# -- enforcement rules ---------------------------------------------------------------------------------
def test_worker_groups_are_neither_controller_nor_login() -> None:
    def group(name: str, node_type: str | None = None) -> ClusterInstanceGroupSpecification:
        slurm = ClusterSlurmConfig.model_construct(NodeType=node_type) if node_type else None
        return ClusterInstanceGroupSpecification.model_construct(InstanceGroupName=name, SlurmConfig=slurm)

    config = CreateClusterRequest.model_construct(
        InstanceGroups=[
            group("controller-machine"),
            group("login-group"),
            group("worker-group-1"),
            group("head", "Controller"),
            group("gpus", "Compute"),
        ]
    )
    provisioning = ProvisioningParameters.model_construct(
        controller_group="controller-machine", login_group="login-group"
    )

    assert worker_groups(config, provisioning) == ["worker-group-1", "gpus"]
    assert worker_groups(config, None) == ["controller-machine", "login-group", "worker-group-1", "gpus"]


def group(name: str, target: int, **extra: Any) -> dict[str, Any]:
    return {
        "InstanceGroupName": name,
        "InstanceType": "ml.p5.48xlarge",
        "CurrentCount": target,
        "TargetCount": target,
        "Status": "InService",
        "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/sagemaker-hyperpod-execution-role",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/src/", "OnCreate": "on_create.sh"},
        "ThreadsPerCore": 1,
        **extra,
    }


def test_scale_to_min_asks_each_worker_group_for_its_minimum_with_a_valid_request() -> None:
    described = {
        "InstanceGroups": [
            group("controller-machine", 1),
            group("worker-group-1", 4, MinCount=1, OnStartDeepHealthChecks=["InstanceStress"]),
            group("worker-group-2", 2),
            group("worker-group-3", 0),
        ]
    }

    specs, counts = scale_to_min_groups(described, ["worker-group-1", "worker-group-2", "worker-group-3"])

    assert [(s["InstanceGroupName"], s["InstanceCount"]) for s in specs] == [
        ("worker-group-1", 1),
        ("worker-group-2", 0),
    ]
    assert specs[0]["MinInstanceCount"] == 1
    assert counts == {"worker-group-1": [4, 1], "worker-group-2": [2, 0], "worker-group-3": [0, 0]}
    model = boto3.client("sagemaker", region_name="us-east-1").meta.service_model
    shape = model.operation_model("UpdateCluster").input_shape
    assert shape is not None
    report = ParamValidator().validate({"ClusterName": "c", "InstanceGroups": specs}, shape)
    assert not report.has_errors(), report.generate_report()


def test_growth_block_holds_until_its_time() -> None:
    blocked = cluster("c1").model_copy(update={"growth_blocked_until": datetime(2026, 12, 1, tzinfo=UTC)})

    with pytest.raises(GrowthBlockedError, match="growth-block"):
        ensure_growth_allowed(blocked, NOW)
    ensure_growth_allowed(blocked, datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC))
    ensure_growth_allowed(cluster("c2"), NOW)


# -- the use case ------------------------------------------------------------------------------------
@dataclass
class FakeBudgets:
    spend: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (actual, forecast)
    limit: str = "2500.0"

    def describe_budget(self, *, AccountId: str, BudgetName: str) -> dict[str, Any]:
        if BudgetName not in self.spend:
            raise ClientError({"Error": {"Code": "NotFoundException", "Message": "nope"}}, "DescribeBudget")
        actual, forecast = self.spend[BudgetName]
        return {
            "Budget": {
                "BudgetName": BudgetName,
                "BudgetLimit": {"Amount": self.limit, "Unit": "USD"},
                "TimeUnit": "MONTHLY",
                "CalculatedSpend": {
                    "ActualSpend": {"Amount": actual, "Unit": "USD"},
                    "ForecastedSpend": {"Amount": forecast, "Unit": "USD"},
                },
            }
        }


@dataclass
class FakeSageMaker:
    groups: list[dict[str, Any]]
    updates: list[dict[str, Any]] = field(default_factory=list)
    fail_with: str | None = None

    def describe_cluster(self, *, ClusterName: str) -> dict[str, Any]:
        return {"ClusterName": ClusterName, "ClusterStatus": "InService", "InstanceGroups": self.groups}

    def update_cluster(self, **request: Any) -> dict[str, Any]:
        if self.fail_with:
            raise ClientError({"Error": {"Code": self.fail_with, "Message": "no"}}, "UpdateCluster")
        self.updates.append(request)
        return {"ClusterArn": "arn"}


@dataclass
class FakeSns:
    published: list[dict[str, Any]] = field(default_factory=list)
    failures: int = 0
    dies: bool = False

    def publish(self, **request: Any) -> dict[str, str]:
        if self.dies:
            raise TimeoutError("Task timed out")
        if self.failures:
            self.failures -= 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": "down"}}, "Publish")
        self.published.append(request)
        return {"MessageId": f"m-{len(self.published)}"}

    def alerts(self) -> list[dict[str, Any]]:
        return [json.loads(p["Message"]) for p in self.published]


@dataclass
class FakeEvents:
    details: list[dict[str, Any]] = field(default_factory=list)
    down: bool = False

    def put_events(self, *, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if self.down:
            raise ClientError({"Error": {"Code": "InternalException", "Message": "down"}}, "PutEvents")
        self.details += [json.loads(e["Detail"]) for e in Entries]
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}


def cluster(name: str, enforcement: str = "alert", status: ClusterStatus = ClusterStatus.ACTIVE) -> Cluster:
    return Cluster(
        cluster_name=name,
        status=status,
        created_at="2026-11-01T00:00:00.000Z",
        updated_at="2026-11-01T00:00:00.000Z",
        last_operation_id="op-20261101000000-aaaaaaaa",
        owner="alice",
        project="llm-pretraining",
        budget_name=f"hyperpod-{name}",
        budget_enforcement=enforcement,
        worker_groups=["worker-group-1"],
    )


@dataclass
class World:
    deps: BudgetAlertDeps
    store: StateTable
    alerts: BudgetAlertTable
    budgets: FakeBudgets
    sagemaker: FakeSageMaker
    sns: FakeSns
    events: FakeEvents
    clock: list[datetime]

    def register(self, registered: Cluster) -> None:
        item: dict[str, Any] = {
            "pk": {"S": f"CLUSTER#{registered.cluster_name}"},
            "sk": {"S": f"CLUSTER#{registered.cluster_name}"},
            "kind": {"S": "CLUSTER"},
        }
        for key, value in registered.model_dump(by_alias=True, mode="json", exclude_none=True).items():
            item[key] = {"L": [{"S": v} for v in value]} if isinstance(value, list) else {"S": str(value)}
        boto3.client("dynamodb", region_name="us-east-1").put_item(TableName=TABLE, Item=item)


@pytest.fixture
def world() -> Iterator[World]:
    environment = TEMPLATE["Resources"]["BudgetAlertsFunction"]["Properties"]["Environment"]["Variables"]
    assert set(environment) == {"ALERTS_TOPIC_ARN", "API_URL"}  # what the settings below stand for
    settings = BudgetAlertsSettings(STATE_TABLE_NAME=TABLE, ALERTS_TOPIC_ARN=ALERTS, API_URL=API_URL)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(ddb, TABLE)
        clock = [NOW]
        store, alerts = StateTable(TABLE, client=ddb), BudgetAlertTable(TABLE, ddb=ddb)
        fakes = (
            FakeBudgets({"hyperpod-ml-cluster": ("2210.5", "3900")}),
            FakeSageMaker([group("controller-machine", 1), group("worker-group-1", 4, MinCount=1)]),
            FakeSns(),
            FakeEvents(),
        )
        deps = BudgetAlertDeps(
            settings=settings,
            store=store,
            alerts=alerts,
            budgets=cast(Any, fakes[0]),
            sagemaker=cast(Any, fakes[1]),
            sns=cast(Any, fakes[2]),
            events=cast(Any, fakes[3]),
            hourly_rate=lambda name, day: (
                (Decimal("396.94"), "spend-meter") if (name, day) == ("ml-cluster", NOW.date()) else None
            ),
            now=lambda: clock[0],
        )
        yield World(deps, store, alerts, *fakes, clock)


# DescribeBudget's figures once ACTUAL spend is past the $2,500 limit (what a real 100 % notification follows)
OVER = ("2610.25", "3900")


def crossing(percent: int, alert_type: str = "ACTUAL", name: str = "hyperpod-ml-cluster") -> str:
    threshold = Decimal(2500) * percent / 100
    return (
        EVENT_MESSAGE.replace("> $2,000.00", f"> ${threshold:,.2f}")
        .replace("ACTUAL", alert_type)
        .replace("hyperpod-ml-cluster", name)
    )


def test_a_notification_becomes_one_alert_with_the_clusters_figures(world: World) -> None:
    world.register(cluster("ml-cluster"))

    handled = handle_notification(EVENT_MESSAGE, "AWS Budgets: ...", world.deps)

    assert handled is Handled.PUBLISHED
    [published] = world.sns.published
    assert published["TopicArn"] == ALERTS
    assert published["Subject"] == "HyperPod budget: ml-cluster spent 80% of $2,500.00"
    assert published["MessageAttributes"]["clusterName"]["StringValue"] == "ml-cluster"
    alert = json.loads(published["Message"])
    assert alert == {
        "kind": "BudgetThresholdCrossed",
        "summary": alert["summary"],
        "budgetName": "hyperpod-ml-cluster",
        "clusterName": "ml-cluster",
        "owner": "alice",
        "project": "llm-pretraining",
        "alertType": "ACTUAL",
        "thresholdPercent": "80",
        "thresholdUsd": "2000.00",
        "budgetUsd": "2500.0",
        "notifiedAmountUsd": "2148.37",
        "actualUsd": "2210.5",
        "forecastUsd": "3900",
        "hourlyRateUsd": "396.94",
        "hourlyRateSource": "spend-meter",
        "period": "2026-11",
        "clusterUrl": f"{API_URL}/clusters/ml-cluster",
        "budgetConsoleUrl": "https://console.aws.amazon.com/costmanagement/home#/budgets",
        "enforcement": None,
    }
    assert "cluster ml-cluster: ACTUAL cost $2,148.37 crossed 80% of the $2,500.00 budget" in alert["summary"]
    assert "$396.94/hour" in alert["summary"]


def test_budgets_notifying_twice_gives_one_alert(world: World) -> None:
    world.register(cluster("ml-cluster"))

    first = handle_notification(EVENT_MESSAGE, None, world.deps)
    world.clock[0] += timedelta(hours=8)  # Budgets' next refresh notifies the same crossing again
    second = handle_notification(EVENT_MESSAGE, None, world.deps)

    assert (first, second) == (Handled.PUBLISHED, Handled.DUPLICATE)
    assert len(world.sns.published) == 1


def test_each_threshold_and_each_period_alerts_once(world: World) -> None:
    world.register(cluster("ml-cluster"))
    december = crossing(80).replace("November 10, 2026", "December 02, 2026")

    for message in (crossing(50), crossing(80), crossing(100, "FORECASTED"), crossing(80)):
        handle_notification(message, None, world.deps)
    world.clock[0] = datetime(2026, 12, 2, 9, tzinfo=UTC)  # the period is the function's clock's
    handle_notification(december, None, world.deps)

    assert [(a["alertType"], a["thresholdPercent"], a["period"]) for a in world.sns.alerts()] == [
        ("ACTUAL", "50", "2026-11"),
        ("ACTUAL", "80", "2026-11"),
        ("FORECASTED", "100", "2026-11"),
        ("ACTUAL", "80", "2026-12"),
    ]


def test_an_alert_sns_refused_is_kept_and_published_by_the_schedule_once(world: World) -> None:
    # issue 20, finding 7: with SNS down the alert went to the dead-letter queue after Lambda's retries
    world.register(cluster("ml-cluster"))
    world.sns.failures = 1

    assert handle_notification(EVENT_MESSAGE, None, world.deps) is Handled.RETRYING
    # a duplicate within the claim's lease looks like a concurrent delivery
    with pytest.raises(AlertInFlightError):
        handle_notification(EVENT_MESSAGE, None, world.deps)
    assert retry_unfinished(world.deps) == {}  # the claim's lease is not over yet
    world.clock[0] += timedelta(seconds=budget_alerts.CLAIM_LEASE_SECONDS + 1)

    assert retry_unfinished(world.deps) == {"alert published": 1}
    assert retry_unfinished(world.deps) == {}
    assert handle_notification(EVENT_MESSAGE, None, world.deps) is Handled.DUPLICATE
    [alert] = world.sns.alerts()
    assert alert["clusterName"] == "ml-cluster"
    assert world.sns.published[0]["MessageAttributes"]["clusterName"]["StringValue"] == "ml-cluster"


def test_an_invocation_that_died_after_its_claim_is_redone_by_the_schedule(world: World) -> None:
    world.register(cluster("ml-cluster"))
    world.sns.dies = True  # the function timed out inside Publish: nothing after its claim happened
    with pytest.raises(TimeoutError):
        handle_notification(EVENT_MESSAGE, None, world.deps)
    world.sns.dies = False
    world.clock[0] += timedelta(seconds=budget_alerts.CLAIM_LEASE_SECONDS + 1)

    assert retry_unfinished(world.deps) == {"alert published": 1}
    assert len(world.sns.published) == 1


def test_another_budget_alerts_without_a_cluster(world: World) -> None:
    world.register(cluster("ml-cluster").model_copy(update={"budget_name": "custom"}))

    world.budgets.spend["team-budget"] = ("2100", "2600")
    handle_notification(crossing(80, name="hyperpod-ml-cluster"), None, world.deps)
    handle_notification(crossing(80, name="team-budget"), None, world.deps)

    [mismatched, other] = world.sns.alerts()
    assert mismatched["clusterName"] is None  # the registry's cluster has another budget
    assert (other["budgetName"], other["clusterName"], other["actualUsd"]) == ("team-budget", None, "2100")


def test_a_forged_crossing_that_describe_budget_does_not_confirm_changes_nothing(world: World) -> None:
    """Issue 20: a fake notification scaled a scale-to-min cluster 4 -> 0 while its ActualSpend was $0."""
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = ("0", "0")

    assert handle_notification(crossing(100), None, world.deps) is Handled.UNCONFIRMED
    assert handle_notification(crossing(100, "FORECASTED"), None, world.deps) is Handled.UNCONFIRMED

    assert world.sagemaker.updates == []
    assert world.sns.published == []
    # no claim was made either: the real crossing, once Budgets counts it, still alerts and enforces
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    assert handle_notification(crossing(100), None, world.deps) is Handled.PUBLISHED
    assert len(world.sagemaker.updates) == 1


@pytest.mark.parametrize(
    ("message", "spend"),
    [
        (crossing(100).replace("AWS Account 123456789012", "AWS Account 444455556666"), OVER),
        (crossing(100, name="hyperpod-no-such-budget"), OVER),
        # a message cannot lower the limit: 100 % of a claimed $1,000 is checked as 100 % of the real $2,500
        (
            crossing(100)
            .replace("Budgeted Amount: $2,500.00", "Budgeted Amount: $1,000.00")
            .replace("> $2,500.00", "> $1,000.00"),
            ("2210.5", "3900"),
        ),
    ],
    ids=["other-account", "unknown-budget", "claimed-limit"],
)
def test_a_notification_is_checked_against_this_accounts_budget(
    world: World, message: str, spend: tuple[str, str]
) -> None:
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = spend

    assert handle_notification(message, None, world.deps) is Handled.UNCONFIRMED
    assert world.sagemaker.updates == []
    assert world.sns.published == []


def test_the_messages_own_date_never_sets_the_period_or_a_growth_blocks_end(world: World) -> None:
    """Issue 20: a message dated 2099 blocked growth until 2100; five forged dates gave four alerts."""
    world.register(cluster("ml-cluster", "block-growth"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    dated = [
        crossing(100).replace("November 10, 2026", day)
        for day in (
            "December 31, 2099",
            "January 01, 2030",
            "March 03, 2027",
            "July 04, 2026",
            "May 05, 2031",
        )
    ]

    handled = [handle_notification(message, None, world.deps) for message in dated]

    assert handled == [Handled.PUBLISHED] + [Handled.DUPLICATE] * 4
    [alert] = world.sns.alerts()
    assert alert["period"] == "2026-11"  # NOW's month
    registered = world.store.get_cluster("ml-cluster")
    assert registered is not None
    assert registered.growth_blocked_until == datetime(2026, 12, 1, tzinfo=UTC)


def test_a_message_that_is_not_from_budgets_is_forwarded(world: World) -> None:
    assert handle_notification("hello", "test", world.deps) is Handled.FORWARDED

    [alert] = world.sns.alerts()
    assert alert["kind"] == "UnrecognisedBudgetNotification"
    assert alert["message"] == "hello"


def test_scale_to_min_at_100_percent_actual_records_an_operation(world: World) -> None:
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER

    handle_notification(crossing(80), None, world.deps)
    assert world.sagemaker.updates == []  # below 100 %: an alert only
    handle_notification(crossing(100, "FORECASTED"), None, world.deps)
    assert world.sagemaker.updates == []  # a forecast is not spend
    handle_notification(crossing(100), None, world.deps)
    handle_notification(crossing(100), None, world.deps)  # notified twice: enforced once

    [update] = world.sagemaker.updates
    assert update["ClusterName"] == "ml-cluster"
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in update["InstanceGroups"]] == [
        ("worker-group-1", 1)
    ]
    enforcement = world.sns.alerts()[-1]["enforcement"]
    assert enforcement["mode"] == "scale-to-min"
    assert enforcement["result"] == "done"
    assert enforcement["instanceCounts"] == {"worker-group-1": [4, 1]}
    operation = world.store.get_operation(enforcement["operationId"])
    assert operation is not None
    assert (operation.operation_type, operation.status) == (
        OperationType.SCALE_TO_MIN,
        OperationStatus.SUCCEEDED,
    )
    assert [s.name for s in operation.steps] == ["Describe Cluster", "Update Cluster"]
    assert operation.requested_by == "budget:hyperpod-ml-cluster"
    [entry] = world.store.list_history("ml-cluster")
    assert (entry.operation_id, entry.operation_type) == (operation.operation_id, OperationType.SCALE_TO_MIN)
    assert [d["status"] for d in world.events.details] == ["SUCCEEDED"]


def test_a_scale_down_refused_for_good_is_a_failed_operation_and_still_alerts(world: World) -> None:
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    world.sagemaker.fail_with = "ResourceNotFound"  # no retry changes that

    handle_notification(crossing(100), None, world.deps)

    [alert] = world.sns.alerts()
    assert alert["enforcement"]["result"] == "failed"
    assert "SageMaker.ResourceNotFound" in alert["summary"]
    operation = world.store.get_operation(alert["enforcement"]["operationId"])
    assert operation is not None
    assert operation.status is OperationStatus.FAILED
    assert operation.error is not None
    assert operation.error.error == "SageMaker.ResourceNotFound"


def test_a_refused_scale_down_is_retried_on_the_schedule_until_done(world: World) -> None:
    # issue 20, finding 7: UpdateCluster refused (cluster Updating) ended FAILED, and the redelivery
    # counted as a duplicate: the workers stayed up all period
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    world.sagemaker.fail_with = "ConflictException"

    handle_notification(crossing(100), None, world.deps)
    [alert] = world.sns.alerts()
    assert alert["enforcement"]["result"] == "pending"
    assert "SageMaker.ConflictException" in alert["enforcement"]["message"]
    operation_id = alert["enforcement"]["operationId"]
    assert handle_notification(crossing(100), None, world.deps) is Handled.DUPLICATE  # alerted once
    world.clock[0] += timedelta(minutes=budget_alerts.RETRY_MINUTES)
    assert retry_unfinished(world.deps) == {"scale-to-min pending": 1}
    held = world.store.get_operation(operation_id)
    assert held is not None
    assert held.status is OperationStatus.RUNNING

    world.sagemaker.fail_with = None  # the cluster's update ended
    world.clock[0] += timedelta(minutes=budget_alerts.RETRY_MINUTES)
    assert retry_unfinished(world.deps) == {"scale-to-min done": 1}
    assert retry_unfinished(world.deps) == {}

    [update] = world.sagemaker.updates
    assert [(g["InstanceGroupName"], g["InstanceCount"]) for g in update["InstanceGroups"]] == [
        ("worker-group-1", 1)
    ]
    done = world.store.get_operation(operation_id)
    assert done is not None
    assert done.status is OperationStatus.SUCCEEDED
    finished = world.sns.alerts()[-1]
    assert finished["kind"] == "BudgetEnforcementFinished"
    assert finished["enforcement"]["result"] == "done"
    assert len(world.sns.published) == 2
    assert [d["status"] for d in world.events.details] == ["SUCCEEDED"]


def test_a_scale_down_refused_past_the_retry_window_fails_and_is_announced(world: World) -> None:
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    world.sagemaker.fail_with = "ThrottlingException"

    handle_notification(crossing(100), None, world.deps)
    world.clock[0] += budget_alerts.ENFORCEMENT_RETRY_FOR

    assert retry_unfinished(world.deps) == {"scale-to-min failed": 1}
    finished = world.sns.alerts()[-1]
    assert finished["kind"] == "BudgetEnforcementFinished"
    assert finished["enforcement"]["result"] == "failed"
    operation = world.store.get_operation(finished["enforcement"]["operationId"])
    assert operation is not None
    assert operation.status is OperationStatus.FAILED
    assert retry_unfinished(world.deps) == {}


def test_a_scale_down_is_announced_when_eventbridge_is_down(world: World) -> None:
    world.register(cluster("ml-cluster", "scale-to-min"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    world.events.down = True

    assert handle_notification(crossing(100), None, world.deps) is Handled.PUBLISHED

    [alert] = world.sns.alerts()
    assert alert["enforcement"]["result"] == "done"
    assert len(world.sagemaker.updates) == 1


def test_block_growth_marks_the_cluster_until_the_next_period(world: World) -> None:
    world.register(cluster("ml-cluster", "block-growth"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER

    handle_notification(crossing(100), None, world.deps)

    registered = world.store.get_cluster("ml-cluster")
    assert registered is not None
    assert registered.growth_blocked_until == datetime(2026, 12, 1, tzinfo=UTC)
    assert registered.growth_blocked_by == "budget:hyperpod-ml-cluster"
    with pytest.raises(GrowthBlockedError):
        ensure_growth_allowed(registered, NOW)
    assert world.sagemaker.updates == []
    world.alerts.lift_growth_block("ml-cluster")
    lifted = world.store.get_cluster("ml-cluster")
    assert lifted is not None
    assert lifted.growth_blocked_until is None


@pytest.mark.parametrize("status", [ClusterStatus.DELETING, ClusterStatus.CREATING])
def test_enforcement_skips_a_cluster_that_is_not_active(world: World, status: ClusterStatus) -> None:
    world.register(cluster("ml-cluster", "scale-to-min", status))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER

    handle_notification(crossing(100), None, world.deps)

    assert world.sagemaker.updates == []
    assert world.sns.alerts()[0]["enforcement"]["result"] == "skipped"


def test_the_claim_is_one_conditional_write(world: World) -> None:
    key = AlertKey("hyperpod-ml-cluster", "2026-11", "ACTUAL", "80")
    claim = world.alerts.claim(key, now=NOW, lease_seconds=60, operation_id="op-1", expires_at=1)
    again = world.alerts.claim(key, now=NOW, lease_seconds=60, operation_id="op-2", expires_at=1)
    later = world.alerts.claim(
        key, now=NOW + timedelta(seconds=61), lease_seconds=60, operation_id="op-3", expires_at=1
    )
    world.alerts.mark_published(key, message_id="m", at=NOW)
    done = world.alerts.claim(key, now=NOW, lease_seconds=60, operation_id=None, expires_at=1)

    assert [(c.result, c.operation_id) for c in (claim, again, later, done)] == [
        (ClaimResult.CLAIMED, "op-1"),
        (ClaimResult.IN_FLIGHT, "op-1"),
        (ClaimResult.TAKEN_OVER, "op-1"),  # the operation the first claim chose
        (ClaimResult.PUBLISHED, "op-1"),
    ]


def test_settings_name_what_is_missing() -> None:
    with pytest.raises(Exception, match="API_URL"):
        BudgetAlertsSettings.from_environ({"STATE_TABLE_NAME": "t", "ALERTS_TOPIC_ARN": ALERTS})


def test_the_hourly_rate_is_the_spend_meters_of_this_month() -> None:
    spend = InMemorySpendStore()
    as_of = NOW - timedelta(minutes=10)
    spend.put_meter(
        SpendMeter(
            cluster_name="ml-cluster",
            month="2026-11",
            as_of=as_of,
            hourly_rate_usd=Decimal("396.94"),
            month_to_date_usd=Decimal(2100),
            forecast_usd=Decimal(9000),
        )
    )
    rate = spend_meter_rate(spend)

    assert rate("ml-cluster", date(2026, 11, 10)) == (Decimal("396.94"), f"spend meter, {as_of.isoformat()}")
    assert rate("other", date(2026, 11, 10)) is None
    assert rate("ml-cluster", date(2026, 12, 1)) is None


ADMIN = f"arn:aws:iam::{ACCOUNT}:role/platform-admin"


@dataclass
class ApiDeps:
    """What DELETE /clusters/{name}/growth-block reads of the API's Dependencies."""

    store: StateTable
    settings: Any
    now: Any = field(default=lambda: NOW)


def test_only_an_admin_lifts_a_growth_block(world: World) -> None:
    world.register(cluster("ml-cluster", "block-growth"))
    world.budgets.spend["hyperpod-ml-cluster"] = OVER
    handle_notification(crossing(100), None, world.deps)
    settings = type(
        "Settings",
        (),
        {"admin_principal_arns": (ADMIN,), "owner_matching": "role", "state_table_name": TABLE},
    )()
    deps = cast(Any, ApiDeps(world.store, settings))

    with pytest.raises(NotAllowedError):
        lift_growth_block(deps, "ml-cluster", caller=f"arn:aws:iam::{ACCOUNT}:user/alice", table=world.alerts)
    with pytest.raises(NotFoundError):
        lift_growth_block(deps, "nowhere", caller=ADMIN, table=world.alerts)
    lifted = lift_growth_block(
        deps,
        "ml-cluster",
        caller=f"arn:aws:sts::{ACCOUNT}:assumed-role/platform-admin/ann",
        table=world.alerts,
    )

    assert (lifted.growth_blocked, lifted.was_blocked) == (False, True)
    registered = world.store.get_cluster("ml-cluster")
    assert registered is not None
    ensure_growth_allowed(registered, NOW)
