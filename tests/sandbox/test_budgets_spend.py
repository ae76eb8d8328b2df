"""The Budgets simulator's seams, the spend it accrues from the fleet, prices and helpers, over HTTP."""

# ruff: noqa: F811  (the tests name fixtures imported from budgets_support.py)
from __future__ import annotations

import inspect
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.budgets.models import Budget, BudgetsBackend

from sandbox.emulator.clock import SandboxClock
from sandbox.services.budgets import BudgetsSimulator, budget_message, topic_allows_budgets
from sandbox.services.pricing.list_prices import DEFAULT_PRICES, UnknownInstanceTypeError, price_per_hour
from sandbox.services.running_instances import RunningInstance
from tests.sandbox.budgets_support import (
    ACCOUNT,
    DEMO_ARN,
    DEMO_BURN,
    DEMO_TAGS,
    REGION,
    budgets,  # noqa: F401 (a fixture the tests name)
    budgets_clock,  # noqa: F401 (a fixture the tests name)
    budgets_sim,  # noqa: F401 (a fixture the tests name)
    calculated_spend,
    create_budget,
    fleet,  # noqa: F401 (a fixture the tests name)
    notification,
    run_hours,
)


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
