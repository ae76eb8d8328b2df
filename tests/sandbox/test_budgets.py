"""The Budgets simulator through plain boto3 clients (botocore parameter validation on)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.budgets.models import Budget, BudgetsBackend, Notification
from moto.budgets.responses import BudgetsResponse
from moto.core.utils import camelcase_to_underscores
from mypy_boto3_budgets.type_defs import SubscriberTypeDef

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets import (
    DEFAULT_REFRESH_HOURS,
    SUBSCRIBER_OPERATIONS,
    BudgetsSimulator,
    budget_message,
    topic_allows_budgets,
)
from sandbox.services.pricing.list_prices import DEFAULT_PRICES, UnknownInstanceTypeError, price_per_hour
from sandbox.services.running_instances import RunningInstance

REGION = "us-east-1"
ACCOUNT = "123456789012"
START = datetime(2026, 3, 10, tzinfo=UTC)  # 22 days (528 h) before the month ends
DEMO_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/demo0001"
OTHER_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/other001"
DEMO_TAGS = {"ClusterName": "demo", "owner": "alice", "project": "llm"}
DEMO_BURN = Decimal("199.40")  # 2 x ml.p5.48xlarge (98.32) + 1 x ml.m5.12xlarge (2.76) per hour


def demo_fleet() -> list[RunningInstance]:
    return [
        RunningInstance(
            "demo", DEMO_ARN, "worker-group-1", "i-0aaaaaaaaaaaaaaa1", "ml.p5.48xlarge", DEMO_TAGS
        ),
        RunningInstance(
            "demo", DEMO_ARN, "worker-group-1", "i-0aaaaaaaaaaaaaaa2", "ml.p5.48xlarge", DEMO_TAGS
        ),
        RunningInstance(
            "demo", DEMO_ARN, "controller-machine", "i-0aaaaaaaaaaaaaaa3", "ml.m5.12xlarge", DEMO_TAGS
        ),
    ] + [
        RunningInstance(
            "other", OTHER_ARN, "gpu", f"i-0bbbbbbbbbbbbbbb{n}", "ml.g5.12xlarge", {"ClusterName": "other"}
        )
        for n in range(4)
    ]


@pytest.fixture
def budgets_clock() -> SandboxClock:
    return SandboxClock(speed=0, start=START)


@pytest.fixture
def fleet() -> list[RunningInstance]:
    """The simulated fleet; tests change it in place."""
    return demo_fleet()


@pytest.fixture
def budgets_sim(
    iam_keys_env: None, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> Iterator[BudgetsSimulator]:
    # Refreshed every simulated minute: these tests step hours at a time and check each step's
    # spend; AWS's cadence (DEFAULT_REFRESH_HOURS) has tests of its own.
    with (
        mock_aws(),
        BudgetsSimulator(
            budgets_clock, lambda: list(fleet), region=REGION, account_id=ACCOUNT, refresh_hours=1 / 60
        ) as simulator,
    ):
        yield simulator


@pytest.fixture
def budgets(budgets_sim: BudgetsSimulator) -> Any:
    return boto3.client("budgets", region_name=REGION)


Topic = tuple[str, Callable[[], list[dict[str, Any]]]]  # (topic ARN, drain its subscribed queue)


@pytest.fixture
def alerts_topic(budgets_topic: Callable[..., Topic]) -> Topic:
    """An SNS topic AWS Budgets may publish to, subscribed by an SQS queue; (topic ARN, drain)."""
    return budgets_topic("budget-alerts")


@pytest.fixture
def budgets_topic(
    budgets_sim: BudgetsSimulator, capture_queue: Callable[[str], Topic]
) -> Callable[..., Topic]:
    """Makes SNS topics subscribed by an SQS queue: ``budgets_topic(name, allow_budgets=True)`` ->
    (topic ARN, drain of the SNS envelopes); only with ``allow_budgets`` may AWS Budgets publish."""

    def make_topic(name: str, *, allow_budgets: bool = True) -> Topic:
        sns = boto3.client("sns", region_name=REGION)
        topic_arn = sns.create_topic(Name=name)["TopicArn"]
        if allow_budgets:
            policy = {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "AWSBudgets-notification",
                        "Effect": "Allow",
                        "Principal": {"Service": "budgets.amazonaws.com"},
                        "Action": "SNS:Publish",
                        "Resource": topic_arn,
                        "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
                    }
                ],
            }
            sns.set_topic_attributes(
                TopicArn=topic_arn, AttributeName="Policy", AttributeValue=json.dumps(policy)
            )
        queue_arn, drain = capture_queue(f"{name}-queue")
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
        return topic_arn, drain

    return make_topic


def notification(
    threshold: float,
    subscribers: list[dict[str, str]],
    *,
    kind: str = "ACTUAL",
    threshold_type: str = "PERCENTAGE",
) -> dict[str, Any]:
    return {
        "Notification": {
            "NotificationType": kind,
            "ComparisonOperator": "GREATER_THAN",
            "Threshold": threshold,
            "ThresholdType": threshold_type,
        },
        "Subscribers": subscribers,
    }


def sns(topic_arn: str) -> list[dict[str, str]]:
    return [{"SubscriptionType": "SNS", "Address": topic_arn}]


def create_budget(
    client: Any,
    name: str = "hyperpod-demo",
    *,
    limit: str = "1000",
    cluster: str = "demo",
    notifications: list[dict[str, Any]] | None = None,
    **budget: Any,
) -> None:
    body: dict[str, Any] = {
        "BudgetName": name,
        "BudgetLimit": {"Amount": limit, "Unit": "USD"},
        "TimeUnit": "MONTHLY",
        "BudgetType": "COST",
        "CostFilters": {"TagKeyValue": [f"user:ClusterName${cluster}"]},
    }
    body.update(budget)
    client.create_budget(AccountId=ACCOUNT, Budget=body, NotificationsWithSubscribers=notifications or [])


def calculated_spend(client: Any, name: str = "hyperpod-demo") -> tuple[Decimal, Decimal]:
    spend = client.describe_budget(AccountId=ACCOUNT, BudgetName=name)["Budget"]["CalculatedSpend"]
    assert spend["ActualSpend"]["Unit"] == spend["ForecastedSpend"]["Unit"] == "USD"
    return Decimal(spend["ActualSpend"]["Amount"]), Decimal(spend["ForecastedSpend"]["Amount"])


def run_hours(simulator: BudgetsSimulator, clock: SandboxClock, hours: float) -> list[Any]:
    clock.advance(hours * 3600)
    return simulator.tick()


# -- the seams --------------------------------------------------------------------------------------
def test_seam_moto_budgets_backend_shape() -> None:
    """Fails when a moto upgrade moves what the simulator hooks or writes into."""
    assert list(inspect.signature(BudgetsBackend.create_budget).parameters) == [
        "self",
        "account_id",
        "budget",
        "notifications",
    ]
    assert list(inspect.signature(BudgetsBackend.create_notification).parameters) == [
        "self",
        "account_id",
        "budget_name",
        "notification",
        "subscribers",
    ]
    stored = Budget(
        {"BudgetName": "b", "BudgetType": "COST", "BudgetLimit": {"Amount": "1", "Unit": "USD"}}, []
    )
    stored.budget["CalculatedSpend"] = {
        "ActualSpend": {"Amount": "1.5", "Unit": "USD"},
        "ForecastedSpend": {"Amount": "3", "Unit": "USD"},
    }
    assert stored.to_dict()["CalculatedSpend"]["ActualSpend"]["Amount"] == "1.5"


def test_seam_validation_is_installed_and_removed(iam_keys_env: None, budgets_clock: SandboxClock) -> None:
    two_topics = [
        notification(
            80,
            [
                {"SubscriptionType": "SNS", "Address": f"arn:aws:sns:{REGION}:{ACCOUNT}:a"},
                {"SubscriptionType": "SNS", "Address": f"arn:aws:sns:{REGION}:{ACCOUNT}:b"},
            ],
        )
    ]
    with mock_aws():
        client = boto3.client("budgets", region_name=REGION)
        with BudgetsSimulator(budgets_clock, list, region=REGION, account_id=ACCOUNT):
            with pytest.raises(ClientError) as excinfo:
                create_budget(client, "two-topics", notifications=two_topics)
            assert excinfo.value.response["Error"]["Code"] == "InvalidParameterException"
            assert "at most 1 SNS subscriber" in excinfo.value.response["Error"]["Message"]
        create_budget(client, "two-topics", notifications=two_topics)  # plain moto accepts it
        assert not hasattr(BudgetsBackend.create_budget, "__wrapped__")


# -- spend -----------------------------------------------------------------------------------------
def test_spend_accrues_from_the_fleet_by_cluster_tag(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock
) -> None:
    create_budget(budgets, "hyperpod-demo", cluster="demo")
    create_budget(budgets, "hyperpod-other", cluster="other")
    create_budget(budgets, "account-wide", CostFilters={})

    run_hours(budgets_sim, budgets_clock, 2)

    demo_actual, demo_forecast = calculated_spend(budgets, "hyperpod-demo")
    assert demo_actual == 2 * DEMO_BURN
    assert demo_forecast == 2 * DEMO_BURN + DEMO_BURN * 526  # month-end projection of the burn rate
    assert calculated_spend(budgets, "hyperpod-other")[0] == 2 * 4 * Decimal("7.09")
    assert calculated_spend(budgets, "account-wide")[0] == 2 * (DEMO_BURN + 4 * Decimal("7.09"))


def test_budget_created_mid_month_sees_the_month_to_date_spend(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock
) -> None:
    run_hours(budgets_sim, budgets_clock, 3)

    create_budget(budgets)
    budgets_sim.refresh()

    assert calculated_spend(budgets)[0] == 3 * DEMO_BURN


def test_stopped_fleet_stops_spend_and_forecast_flattens(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> None:
    create_budget(budgets)
    run_hours(budgets_sim, budgets_clock, 1)
    fleet.clear()

    run_hours(budgets_sim, budgets_clock, 5)

    assert calculated_spend(budgets) == (DEMO_BURN, DEMO_BURN)


def test_new_month_starts_from_zero(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> None:
    create_budget(budgets)
    run_hours(budgets_sim, budgets_clock, 22 * 24 - 1)  # 23:00 on March 31st
    run_hours(budgets_sim, budgets_clock, 3)  # 02:00 on April 1st: 1 h in March, 2 h in April

    assert calculated_spend(budgets)[0] == 2 * DEMO_BURN


def test_filter_expression_with_tags_and_dimensions(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock
) -> None:
    create_budget(
        budgets,
        "demo-gpus",
        CostFilters={},
        FilterExpression={
            "And": [
                {"Tags": {"Key": "user:ClusterName", "Values": ["demo"], "MatchOptions": ["EQUALS"]}},
                {
                    "Dimensions": {
                        "Key": "INSTANCE_TYPE",
                        "Values": ["ml.p5"],
                        "MatchOptions": ["STARTS_WITH"],
                    }
                },
                {"Not": {"Dimensions": {"Key": "REGION", "Values": ["eu-west-1"]}}},
            ]
        },
    )

    run_hours(budgets_sim, budgets_clock, 1)

    assert calculated_spend(budgets, "demo-gpus")[0] == 2 * Decimal("98.32")


# -- alerts ----------------------------------------------------------------------------------------
def test_actual_threshold_crossing_publishes_once_to_sns(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    budgets_clock: SandboxClock,
    alerts_topic: Topic,
) -> None:
    topic_arn, drain = alerts_topic
    create_budget(budgets, notifications=[notification(80, sns(topic_arn))])

    assert run_hours(budgets_sim, budgets_clock, 4) == []  # $797.60 of $1,000
    assert drain() == []
    [delivery] = run_hours(budgets_sim, budgets_clock, 1)  # $997.00 > $800.00
    assert run_hours(budgets_sim, budgets_clock, 1) == []  # still above: no second alert

    [envelope] = drain()
    assert envelope["TopicArn"] == topic_arn
    assert envelope["Subject"] == "AWS Budgets: hyperpod-demo has exceeded your alert threshold"
    assert envelope["Message"] == (
        "AWS Budget Notification March 10, 2026\n"
        f"AWS Account {ACCOUNT}\n"
        "\n"
        "Dear AWS Customer,\n"
        "\n"
        "You requested that we alert you when the ACTUAL Cost associated with your hyperpod-demo budget is "
        "greater than $800.00 for the current month. The ACTUAL Cost associated with this budget is $997.00. "
        "You can find additional details below and by accessing the AWS Budgets dashboard [1].\n"
        "\n"
        "Budget Name: hyperpod-demo\n"
        "Budget Type: Cost\n"
        "Budgeted Amount: $1,000.00\n"
        "Alert Type: ACTUAL\n"
        "Alert Threshold: > $800.00\n"
        "ACTUAL Amount: $997.00\n"
        "\n"
        "[1] https://console.aws.amazon.com/costmanagement/home#/budgets\n"
    )
    assert delivery.delivered
    assert delivery.message_id == envelope["MessageId"]


@pytest.mark.parametrize(("share", "copies"), [(1.0, 2), (0.0, 1)])
def test_duplicate_deliveries_publish_the_same_alert_twice(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    budgets_clock: SandboxClock,
    alerts_topic: Topic,
    share: float,
    copies: int,
) -> None:
    topic_arn, drain = alerts_topic
    budgets_sim.duplicate_deliveries = share
    create_budget(
        budgets,
        notifications=[
            notification(80, [*sns(topic_arn), {"SubscriptionType": "EMAIL", "Address": "ann@example.com"}])
        ],
    )

    sent = run_hours(budgets_sim, budgets_clock, 5)  # $997.00 > $800.00
    assert run_hours(budgets_sim, budgets_clock, 1) == []  # one crossing, however many copies

    envelopes = drain()
    assert len(envelopes) == copies
    assert len({e["Message"] for e in envelopes}) == 1
    assert len({e["MessageId"] for e in envelopes}) == copies
    assert [d.subscription_type for d in sent].count("SNS") == copies
    assert len(budgets_sim.emails("ann@example.com")) == 1  # e-mail is not duplicated


def test_duplicate_deliveries_is_a_share() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        BudgetsSimulator(SandboxClock(speed=0, start=START), list, duplicate_deliveries=1.5)


def test_absolute_value_and_percentage_thresholds(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    budgets_clock: SandboxClock,
    alerts_topic: Topic,
) -> None:
    topic_arn, drain = alerts_topic
    create_budget(
        budgets,
        notifications=[
            notification(500, sns(topic_arn), threshold_type="ABSOLUTE_VALUE"),  # $500
            notification(90, sns(topic_arn)),  # 90% of $1,000 = $900
        ],
    )

    first = run_hours(budgets_sim, budgets_clock, 3)  # $598.20
    second = run_hours(budgets_sim, budgets_clock, 2)  # $997.00

    assert [d.notification["ThresholdType"] for d in first] == ["ABSOLUTE_VALUE"]
    assert [d.notification["ThresholdType"] for d in second] == ["PERCENTAGE"]
    messages = [m["Message"] for m in drain()]
    assert "Alert Threshold: > $500.00\nACTUAL Amount: $598.20" in messages[0]
    assert "Alert Threshold: > $900.00\nACTUAL Amount: $997.00" in messages[1]


def test_forecasted_threshold_alerts_before_actual_spend_gets_there(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    budgets_clock: SandboxClock,
    alerts_topic: Topic,
) -> None:
    topic_arn, drain = alerts_topic
    create_budget(
        budgets,
        limit="100000",
        notifications=[notification(100, sns(topic_arn), kind="FORECASTED")],
    )

    [delivery] = run_hours(budgets_sim, budgets_clock, 1)  # forecast 199.40 x 528 h = $105,283.20

    assert delivery.notification["NotificationType"] == "FORECASTED"
    [envelope] = drain()
    assert (
        "the FORECASTED Cost associated with your hyperpod-demo budget is greater than $100,000.00"
        in (envelope["Message"])
    )
    assert "Alert Type: FORECASTED\n" in envelope["Message"]
    assert "FORECASTED Amount: $105,283.20\n" in envelope["Message"]


def test_budgets_are_evaluated_on_awss_refresh_cadence_not_continuously(
    iam_keys_env: None, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> None:
    with mock_aws(), BudgetsSimulator(budgets_clock, lambda: list(fleet), account_id=ACCOUNT) as simulator:
        assert simulator.refresh_interval == timedelta(hours=DEFAULT_REFRESH_HOURS) == timedelta(hours=8)
        client = boto3.client("budgets", region_name=REGION)
        create_budget(
            client, notifications=[notification(80, [{"SubscriptionType": "EMAIL", "Address": "a@b.c"}])]
        )

        assert run_hours(simulator, budgets_clock, 5) == []  # $997.00 > $800.00 at 05:00, not yet seen
        assert run_hours(simulator, budgets_clock, 2.9) == []
        assert calculated_spend(client) == (Decimal(0), Decimal(0))  # not refreshed yet: moto's zero
        [alert] = run_hours(simulator, budgets_clock, 0.1)  # the 08:00 refresh
        assert alert.sent_at == START + timedelta(hours=8)
        assert "ACTUAL Amount: $1,595.20" in alert.message  # 8 h of spend, as of the refresh
        run_hours(simulator, budgets_clock, 4)  # 12:00: the budget still shows the 08:00 refresh
        assert calculated_spend(client)[0] == 8 * DEMO_BURN
        run_hours(simulator, budgets_clock, 4)  # 16:00
        assert calculated_spend(client)[0] == 16 * DEMO_BURN

    with mock_aws(), BudgetsSimulator(budgets_clock, lambda: list(fleet), refresh_hours=12) as twice_a_day:
        client = boto3.client("budgets", region_name=REGION)
        create_budget(client)  # now 16:00: refreshes at 00:00 and 12:00
        run_hours(twice_a_day, budgets_clock, 7.5)
        assert calculated_spend(client) == (Decimal(0), Decimal(0))  # not refreshed yet: moto's zero
        run_hours(twice_a_day, budgets_clock, 0.5)  # 00:00 of the next day
        assert calculated_spend(client)[0] == 8 * DEMO_BURN
    with pytest.raises(ValueError, match="refresh_hours"):
        BudgetsSimulator(budgets_clock, list, refresh_hours=0)


def test_one_budgets_for_the_account_whatever_the_region_counting_every_region(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> None:
    fleet[:] = [
        RunningInstance("demo", DEMO_ARN, "workers", "i-0aaaaaaaaaaaaaaa1", "ml.p5.48xlarge", DEMO_TAGS),
        RunningInstance(  # the same account's cluster in another region: AWS Budgets counts it
            "demo",
            f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/west00000001",
            "workers",
            "i-0ccccccccccccccc1",
            "ml.p5.48xlarge",
            DEMO_TAGS,
        ),
        RunningInstance(  # another account's: not this account's bill
            "demo",
            "arn:aws:sagemaker:us-east-1:210987654321:cluster/othr00000001",
            "workers",
            "i-0ddddddddddddddd1",
            "ml.p5.48xlarge",
            DEMO_TAGS,
        ),
    ]
    oregon = boto3.client("budgets", region_name="us-west-2")  # botocore sends it to us-east-1 too
    create_budget(oregon, "all-regions", CostFilters={})
    create_budget(
        budgets,
        "oregon-only",
        CostFilters={},
        FilterExpression={"Dimensions": {"Key": "REGION", "Values": ["us-west-2"]}},
    )

    run_hours(budgets_sim, budgets_clock, 1)

    assert calculated_spend(budgets, "all-regions")[0] == 2 * Decimal("98.32")
    assert calculated_spend(oregon, "oregon-only")[0] == Decimal("98.32")
    assert {b["BudgetName"] for b in oregon.describe_budgets(AccountId=ACCOUNT)["Budgets"]} == {
        "all-regions",
        "oregon-only",
    }


def test_set_spend_forces_a_crossing_and_lowering_rearms_it(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    alerts_topic: Topic,
) -> None:
    topic_arn, drain = alerts_topic
    create_budget(budgets, notifications=[notification(80, sns(topic_arn))])

    assert len(budgets_sim.set_spend("hyperpod-demo", "850")) == 1
    assert calculated_spend(budgets)[0] == Decimal(850)
    assert budgets_sim.set_spend("hyperpod-demo", 900) == []  # already in ALARM
    assert budgets_sim.set_spend("hyperpod-demo", 10) == []  # back to OK
    assert len(budgets_sim.set_spend("hyperpod-demo", 810)) == 1  # crosses again
    assert len(drain()) == 2
    with pytest.raises(KeyError, match="no budget"):
        budgets_sim.set_spend("missing", 1)


def test_email_subscribers_are_recorded(budgets: Any, budgets_sim: BudgetsSimulator) -> None:
    emails = [{"SubscriptionType": "EMAIL", "Address": a} for a in ("ops@example.com", "alice@example.com")]
    create_budget(budgets, notifications=[notification(50, emails)])

    budgets_sim.set_spend("hyperpod-demo", 600)

    [to_alice] = budgets_sim.emails("alice@example.com")
    assert to_alice.delivered
    assert to_alice.subject == "AWS Budgets: hyperpod-demo has exceeded your alert threshold"
    assert "ACTUAL Amount: $600.00" in to_alice.message
    assert len(budgets_sim.emails()) == 2


def test_topic_without_budgets_permission_gets_nothing(
    budgets: Any, budgets_sim: BudgetsSimulator, budgets_topic: Callable[..., Topic]
) -> None:
    topic_arn, drain = budgets_topic("locked", allow_budgets=False)
    create_budget(budgets, notifications=[notification(50, sns(topic_arn))])

    [delivery] = budgets_sim.set_spend("hyperpod-demo", 600)

    assert not delivery.delivered
    assert "does not allow budgets.amazonaws.com" in (delivery.error or "")
    assert drain() == []


def test_deleted_budget_stops_alerting_and_a_new_one_rearms(
    budgets: Any,
    budgets_sim: BudgetsSimulator,
    budgets_clock: SandboxClock,
    alerts_topic: Topic,
) -> None:
    topic_arn, drain = alerts_topic
    create_budget(budgets, notifications=[notification(80, sns(topic_arn))])
    assert len(run_hours(budgets_sim, budgets_clock, 5)) == 1

    budgets.delete_budget(AccountId=ACCOUNT, BudgetName="hyperpod-demo")
    assert run_hours(budgets_sim, budgets_clock, 1) == []
    with pytest.raises(ClientError) as excinfo:
        budgets.describe_budget(AccountId=ACCOUNT, BudgetName="hyperpod-demo")
    assert excinfo.value.response["Error"]["Code"] == "NotFoundException"

    create_budget(budgets, notifications=[notification(80, sns(topic_arn))])
    [again] = budgets_sim.refresh()  # the month's $1,196.40 is over the threshold of the new budget
    assert again.message.endswith(
        "ACTUAL Amount: $1,196.40\n\n[1] https://console.aws.amazon.com/costmanagement/home#/budgets\n"
    )
    assert len(drain()) == 2


# -- subscribers ---------------------------------------------------------------------------------
OPS = {"SubscriptionType": "EMAIL", "Address": "ops@example.com"}
ALICE = {"SubscriptionType": "EMAIL", "Address": "alice@example.com"}


def test_seam_moto_lacks_the_subscriber_actions_and_stores_subscribers_per_notification() -> None:
    """Fails when moto grows its own *Subscriber* actions (drop ours) or moves where it keeps them."""
    assert not [op for op in SUBSCRIBER_OPERATIONS if hasattr(BudgetsResponse, camelcase_to_underscores(op))]
    stored = Budget(
        {"BudgetName": "b", "BudgetType": "COST", "BudgetLimit": {"Amount": "1", "Unit": "USD"}},
        [notification(80, [OPS])],
    )
    [entry] = stored.notifications
    assert isinstance(entry, Notification)
    assert entry.details == notification(80, [])["Notification"]
    assert cast(list[dict[str, str]], entry.subscribers) == [OPS]


def test_seam_subscriber_actions_are_installed_and_removed(
    iam_keys_env: None, budgets_clock: SandboxClock
) -> None:
    with mock_aws():
        client = boto3.client("budgets", region_name=REGION)
        create_budget(client, notifications=[notification(80, [OPS])])
        request = {
            "AccountId": ACCOUNT,
            "BudgetName": "hyperpod-demo",
            "Notification": notification(80, [])["Notification"],
        }
        with BudgetsSimulator(budgets_clock, list, region=REGION, account_id=ACCOUNT):
            assert client.describe_subscribers_for_notification(**request)["Subscribers"] == [OPS]
        with pytest.raises(NotImplementedError):
            client.describe_subscribers_for_notification(**request)
        assert not hasattr(BudgetsResponse, "describe_subscribers_for_notification")


def subscribers_of(
    client: Any, threshold: float, budget_name: str = "hyperpod-demo", **notification_fields: Any
) -> list[dict[str, str]]:
    """Every subscriber of the ACTUAL GREATER_THAN ``threshold`` notification, two per page."""
    found: list[dict[str, str]] = []
    kwargs: dict[str, Any] = {
        "AccountId": ACCOUNT,
        "BudgetName": budget_name,
        "Notification": {
            "NotificationType": "ACTUAL",
            "ComparisonOperator": "GREATER_THAN",
            "Threshold": threshold,
            **notification_fields,
        },
        "MaxResults": 2,
    }
    while True:
        page = client.describe_subscribers_for_notification(**kwargs)
        found += page["Subscribers"]
        if not page.get("NextToken"):
            return found
        kwargs["NextToken"] = page["NextToken"]


def test_describe_subscribers_for_notification_lists_each_notifications_own(
    budgets: Any, alerts_topic: Topic
) -> None:
    topic_arn, _ = alerts_topic
    emails = [{"SubscriptionType": "EMAIL", "Address": f"u{n}@example.com"} for n in range(4)]
    create_budget(
        budgets,
        notifications=[notification(80, [*sns(topic_arn), *emails]), notification(100, [OPS])],
    )

    # ThresholdType left out means PERCENTAGE, and 80 names the notification stored as 80.0
    assert subscribers_of(budgets, 80) == [*sns(topic_arn), *emails]  # in pages of two
    assert subscribers_of(budgets, 100.0, ThresholdType="PERCENTAGE") == [OPS]


@pytest.mark.parametrize(
    ("budget_name", "threshold", "message"),
    [
        ("hyperpod-demo", 50, "the notification doesn't exist"),
        ("no-such-budget", 80, "the budget doesn't exist"),
    ],
)
def test_describe_subscribers_of_what_does_not_exist_is_not_found(
    budgets: Any, budget_name: str, threshold: float, message: str
) -> None:
    create_budget(budgets, notifications=[notification(80, [OPS])])

    with pytest.raises(ClientError) as excinfo:
        budgets.describe_subscribers_for_notification(
            AccountId=ACCOUNT,
            BudgetName=budget_name,
            Notification=notification(threshold, [])["Notification"],
        )

    assert excinfo.value.response["Error"]["Code"] == "NotFoundException"
    assert message in excinfo.value.response["Error"]["Message"]


def test_describe_subscribers_rejects_a_bad_next_token(budgets: Any) -> None:
    create_budget(budgets, notifications=[notification(80, [OPS])])

    with pytest.raises(ClientError) as excinfo:
        budgets.describe_subscribers_for_notification(
            AccountId=ACCOUNT,
            BudgetName="hyperpod-demo",
            Notification=notification(80, [])["Notification"],
            NextToken="not-a-token",
        )

    assert excinfo.value.response["Error"]["Code"] == "InvalidNextTokenException"


def test_created_subscriber_is_listed_and_alerted(budgets: Any, budgets_sim: BudgetsSimulator) -> None:
    create_budget(budgets, notifications=[notification(50, [OPS])])

    budgets.create_subscriber(
        AccountId=ACCOUNT,
        BudgetName="hyperpod-demo",
        Notification=notification(50, [])["Notification"],
        Subscriber=ALICE,
    )
    budgets_sim.set_spend("hyperpod-demo", 600)

    assert subscribers_of(budgets, 50) == [OPS, ALICE]
    [to_alice] = budgets_sim.emails("alice@example.com")
    assert "ACTUAL Amount: $600.00" in to_alice.message


@pytest.mark.parametrize(
    ("subscriber", "code"),
    [
        (OPS, "DuplicateRecordException"),
        ({"SubscriptionType": "SNS", "Address": f"arn:aws:sns:{REGION}:{ACCOUNT}:second"}, None),
        ({"SubscriptionType": "SNS", "Address": "not-an-arn"}, "InvalidParameterException"),
    ],
)
def test_create_subscriber_refuses_duplicates_and_limits(
    budgets: Any, subscriber: dict[str, str], code: str | None
) -> None:
    first_topic = sns(f"arn:aws:sns:{REGION}:{ACCOUNT}:first")
    create_budget(budgets, notifications=[notification(50, [OPS, *first_topic])])
    expected = code or "CreationLimitExceededException"  # one SNS topic per notification

    with pytest.raises(ClientError) as excinfo:
        budgets.create_subscriber(
            AccountId=ACCOUNT,
            BudgetName="hyperpod-demo",
            Notification=notification(50, [])["Notification"],
            Subscriber=subscriber,
        )

    assert excinfo.value.response["Error"]["Code"] == expected
    assert subscribers_of(budgets, 50) == [OPS, *first_topic]


def test_deleted_subscriber_is_no_longer_alerted(budgets: Any, budgets_sim: BudgetsSimulator) -> None:
    create_budget(budgets, notifications=[notification(50, [OPS, ALICE])])

    budgets.delete_subscriber(
        AccountId=ACCOUNT,
        BudgetName="hyperpod-demo",
        Notification=notification(50, [])["Notification"],
        Subscriber=OPS,
    )
    budgets_sim.set_spend("hyperpod-demo", 600)

    assert subscribers_of(budgets, 50) == [ALICE]
    assert [d.address for d in budgets_sim.emails()] == ["alice@example.com"]
    with pytest.raises(ClientError) as excinfo:
        budgets.delete_subscriber(
            AccountId=ACCOUNT,
            BudgetName="hyperpod-demo",
            Notification=notification(50, [])["Notification"],
            Subscriber=OPS,
        )
    assert excinfo.value.response["Error"]["Code"] == "NotFoundException"


def test_deleting_the_last_subscriber_deletes_the_notification(budgets: Any) -> None:
    create_budget(budgets, notifications=[notification(50, [OPS]), notification(80, [OPS])])

    budgets.delete_subscriber(
        AccountId=ACCOUNT,
        BudgetName="hyperpod-demo",
        Notification=notification(50, [])["Notification"],
        Subscriber=OPS,
    )

    left = budgets.describe_notifications_for_budget(AccountId=ACCOUNT, BudgetName="hyperpod-demo")
    assert [n["Threshold"] for n in left["Notifications"]] == [80]


# -- validation ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("budget", "notifications", "message"),
    [
        ({"BudgetType": "USAGE"}, [], "COST only"),
        ({"CostFilters": {"UsageType": ["BoxUsage"]}}, [], "Cost filter 'UsageType' is not simulated"),
        ({"CostFilters": {"TagKeyValue": ["ClusterName=demo"]}}, [], "expected 'user:<tag key>$<tag value>'"),
        ({"TimeUnit": "DAILY"}, [notification(80, [], kind="FORECASTED")], "not supported for DAILY"),
        ({"BudgetName": "a:b"}, [], "budget name"),
        (
            {},
            [
                notification(
                    80, [{"SubscriptionType": "EMAIL", "Address": f"u{n}@example.com"} for n in range(11)]
                )
            ],
            "at most 10 EMAIL",
        ),
        (
            {},
            [notification(n, [{"SubscriptionType": "EMAIL", "Address": "a@example.com"}]) for n in range(11)],
            "at most 10 notifications",
        ),
    ],
)
def test_create_budget_rejects_what_aws_or_the_simulator_cannot_take(
    budgets: Any, budget: dict[str, Any], notifications: list[dict[str, Any]], message: str
) -> None:
    for entry in notifications:
        entry["Subscribers"] = entry["Subscribers"] or [
            {"SubscriptionType": "EMAIL", "Address": "a@example.com"}
        ]
    with pytest.raises(ClientError) as excinfo:
        create_budget(budgets, notifications=notifications, **budget)
    assert excinfo.value.response["Error"]["Code"] == "InvalidParameterException"
    assert message in excinfo.value.response["Error"]["Message"]


def test_create_notification_is_validated_too(budgets: Any) -> None:
    create_budget(budgets)
    with pytest.raises(ClientError) as excinfo:
        budgets.create_notification(
            AccountId=ACCOUNT,
            BudgetName="hyperpod-demo",
            Notification=notification(80, [])["Notification"],
            Subscribers=[
                {"SubscriptionType": "SNS", "Address": f"arn:aws:sns:{REGION}:{ACCOUNT}:a"},
                {"SubscriptionType": "SNS", "Address": f"arn:aws:sns:{REGION}:{ACCOUNT}:b"},
            ],
        )
    assert excinfo.value.response["Error"]["Code"] == "InvalidParameterException"


# -- prices and helpers ----------------------------------------------------------------------------
def test_unknown_instance_type_is_a_loud_error(
    budgets_sim: BudgetsSimulator, budgets_clock: SandboxClock, fleet: list[RunningInstance]
) -> None:
    fleet.append(
        RunningInstance("demo", DEMO_ARN, "new", "i-0ccccccccccccccc1", "ml.x99.48xlarge", DEMO_TAGS)
    )
    with pytest.raises(
        UnknownInstanceTypeError, match=r"ml\.x99\.48xlarge.*sandbox/services/pricing/list_prices\.py"
    ):
        run_hours(budgets_sim, budgets_clock, 1)


def test_prices_cover_the_usual_hyperpod_types() -> None:
    for instance_type in (
        "ml.p5.48xlarge",
        "ml.p4d.24xlarge",
        "ml.g5.12xlarge",
        "ml.trn1.32xlarge",
        "ml.c5.xlarge",
    ):
        assert price_per_hour(instance_type) > 0
    assert price_per_hour("ml.t3.medium") < price_per_hour("ml.m5.large") < price_per_hour("ml.p5.48xlarge")
    assert price_per_hour("ml.custom", {**DEFAULT_PRICES, "ml.custom": Decimal(1)}) == 1


def test_topic_policy_check() -> None:
    arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:t"
    allow = {
        "Effect": "Allow",
        "Principal": {"Service": "budgets.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": arn,
    }
    moto_default = {
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": ["SNS:Publish"],
        "Resource": arn,
        "Condition": {"StringEquals": {"AWS:SourceOwner": ACCOUNT}},
    }
    assert topic_allows_budgets({"Statement": [allow]}, arn)
    assert not topic_allows_budgets({"Statement": [moto_default]}, arn)
    assert not topic_allows_budgets({"Statement": [allow, {**allow, "Effect": "Deny"}]}, arn)
    assert not topic_allows_budgets({"Statement": [{**allow, "Resource": arn + "-other"}]}, arn)


def test_daily_message_wording() -> None:
    subject, message = budget_message(
        budget={"BudgetName": "x" * 100, "BudgetLimit": {"Amount": "70", "Unit": "USD"}, "TimeUnit": "DAILY"},
        notification={"NotificationType": "ACTUAL", "ComparisonOperator": "GREATER_THAN", "Threshold": 0},
        threshold_amount=Decimal(0),
        value=Decimal("2.15"),
        account_id=ACCOUNT,
        at=datetime(2023, 3, 4, 6, 58, tzinfo=UTC),
    )
    assert len(subject) == 100  # SNS's limit
    assert message.startswith("AWS Budget Notification March 04, 2023\n")
    assert (
        "is greater than $0.00 per day. Yesterday, the ACTUAL Cost associated with this budget is $2.15."
        in message
    )


# -- over HTTP -------------------------------------------------------------------------------------
def test_calculated_spend_through_moto_server(
    iam_keys_env: None, budgets_clock: SandboxClock, fleet: list[RunningInstance], moto_server: str
) -> None:
    simulator = BudgetsSimulator(budgets_clock, lambda: list(fleet), region=REGION, account_id=ACCOUNT)
    simulator.install()
    try:
        client = boto3.client("budgets", region_name=REGION, endpoint_url=moto_server)
        create_budget(client)
        run_hours(simulator, budgets_clock, 8)  # the first refresh
        assert calculated_spend(client)[0] == 8 * DEMO_BURN
        with pytest.raises(ClientError) as excinfo:
            create_budget(client, "usage", BudgetType="USAGE")
        assert excinfo.value.response["Error"]["Code"] == "InvalidParameterException"
    finally:
        simulator.uninstall()


def test_subscribers_through_moto_server(
    iam_keys_env: None, budgets_clock: SandboxClock, moto_server: str
) -> None:
    simulator = BudgetsSimulator(budgets_clock, list, region=REGION, account_id=ACCOUNT)
    simulator.install()
    try:
        client = boto3.client("budgets", region_name=REGION, endpoint_url=moto_server)
        # the server's backends outlive mock_aws: a name no other test uses
        create_budget(client, "subscribers-over-http", notifications=[notification(80, [OPS])])
        client.create_subscriber(
            AccountId=ACCOUNT,
            BudgetName="subscribers-over-http",
            Notification=notification(80, [])["Notification"],
            Subscriber=cast(SubscriberTypeDef, ALICE),
        )
        assert subscribers_of(client, 80, "subscribers-over-http") == [OPS, ALICE]
    finally:
        simulator.uninstall()
