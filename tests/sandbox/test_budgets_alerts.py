"""The Budgets simulator through plain boto3 clients: threshold alerts published to SNS."""

# ruff: noqa: F811  (the tests name fixtures imported from budgets_support.py)
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets import DEFAULT_REFRESH_HOURS, BudgetsSimulator
from sandbox.services.running_instances import RunningInstance
from tests.sandbox.budgets_support import (
    ACCOUNT,
    DEMO_ARN,
    DEMO_BURN,
    DEMO_TAGS,
    REGION,
    START,
    Topic,
    alerts_topic,  # noqa: F401 (a fixture the tests name)
    budgets,  # noqa: F401 (a fixture the tests name)
    budgets_clock,  # noqa: F401 (a fixture the tests name)
    budgets_sim,  # noqa: F401 (a fixture the tests name)
    budgets_topic,  # noqa: F401 (a fixture the tests name)
    calculated_spend,
    create_budget,
    fleet,  # noqa: F401 (a fixture the tests name)
    notification,
    run_hours,
    sns,
)


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
