"""The Budgets simulator's subscriber actions and request validation, through boto3 and over HTTP."""

# ruff: noqa: F811  (the tests name fixtures imported from budgets_support.py)
from __future__ import annotations

from typing import Any, cast

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.budgets.models import Budget, Notification
from moto.budgets.responses import BudgetsResponse
from moto.core.utils import camelcase_to_underscores
from mypy_boto3_budgets.type_defs import SubscriberTypeDef

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets import SUBSCRIBER_OPERATIONS, BudgetsSimulator
from tests.sandbox.budgets_support import (
    ACCOUNT,
    REGION,
    Topic,
    alerts_topic,  # noqa: F401 (a fixture the tests name)
    budgets,  # noqa: F401 (a fixture the tests name)
    budgets_clock,  # noqa: F401 (a fixture the tests name)
    budgets_sim,  # noqa: F401 (a fixture the tests name)
    budgets_topic,  # noqa: F401 (a fixture the tests name)
    create_budget,
    fleet,  # noqa: F401 (a fixture the tests name)
    notification,
    sns,
)

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
