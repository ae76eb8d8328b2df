"""The test_budgets_* modules' shared setup: the demo fleet, the Budgets simulator and its client, topics."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets import BudgetsSimulator
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
