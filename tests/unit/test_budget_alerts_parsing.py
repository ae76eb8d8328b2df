"""BudgetAlertsFunction: AWS Budgets' message parsed as AWS sends it, enforcement rules, settings."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import boto3
import pytest
from autopilot.dal.spend import InMemorySpendStore
from autopilot.logic.budget_alerts import budget_period, spend_meter_rate
from autopilot.logic.budget_enforcement import (
    GrowthBlockedError,
    ensure_growth_allowed,
    scale_to_min_groups,
    worker_groups,
)
from autopilot.models.budget_alerts import NotABudgetNotificationError, parse_budget_notification
from autopilot.models.spend import SpendMeter
from autopilot.settings import BudgetAlertsSettings
from autopilot_config.models.cluster_config import (
    ClusterInstanceGroupSpecification,
    ClusterSlurmConfig,
    CreateClusterRequest,
)
from autopilot_config.models.provisioning import ProvisioningParameters
from botocore.validate import ParamValidator

from sandbox.services.budgets import budget_message
from tests.unit.budget_alerts_support import ACCOUNT, ALERTS, EVENT_MESSAGE, NOW, cluster, group

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
