"""Budget alerts end to end in the sandbox, driven only by simulated AWS activity: clusters created
through the API with a budget, the sandbox clock advanced so the simulated fleet's spend accrues and
AWS Budgets (the simulator, on its refresh cadence, notifying every crossing TWICE) notifies
BudgetAlertsFunction through BudgetNotificationsTopic. What the test reads is what a subscriber of the
alerts topic gets (an SQS queue), DescribeBudget and DescribeCluster.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from sandbox.services.pricing.list_prices import price_per_hour

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
# Early in a month, so the days advanced here stay within one budget period.
START = datetime(2026, 11, 2, 0, 30, tzinfo=UTC)
SPEED = 1200.0
OPERATION_TIMEOUT_S = 90.0
HOUR = 3600.0
MAX_HOURS = 24 * 6  # simulated: the crossings below come after 1-3 days of spend


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    # FallbackPollSeconds past a create (as test_lifecycle): creates finish on HyperPod's event. The
    # schedules stay off: days of simulated time would fire every sweep hundreds of times; the spend
    # meter is fired when a test needs its figures.
    parameters = {**DEMO_PARAMETERS, "FallbackPollSeconds": 3600}
    clock = SandboxClock(speed=SPEED, start=START)
    with Sandbox(parameters=parameters, clock=clock, schedules=False) as running:
        running.budgets.duplicate_deliveries = 1.0  # AWS Budgets notifies every crossing twice
        yield running


@pytest.fixture(scope="module")
def alerts(sandbox: Sandbox) -> Callable[[], list[dict[str, Any]]]:
    """Subscribe a queue to the alerts topic (budget alerts only); returns a drain of the alerts."""
    sns, sqs = sandbox.client("sns"), sandbox.client("sqs")
    topic = sandbox.stack.outputs["AlertsTopicArn"]
    queue_url = sqs.create_queue(QueueName="budget-alerts-subscriber")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=queue_arn,
        Attributes={
            "RawMessageDelivery": "true",
            "FilterPolicy": json.dumps({"kind": ["BudgetThresholdCrossed"]}),
        },
    )

    def drain() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return found
            for message in batch:
                found.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])

    return drain


def create(api: Any, sandbox: Sandbox, body: dict[str, Any]) -> None:
    accepted = api.create_cluster(body)
    created = api.wait_for_operation(
        accepted["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )
    assert created["status"] == "SUCCEEDED", created.get("error")
    for schedule in spend_meter_schedules(sandbox):  # the running nodes' hourly rate, at list prices
        sandbox.fire_schedule(schedule)
    sandbox.settle(10.0)


def spend_meter_schedules(sandbox: Sandbox) -> list[str]:
    return [logical_id for logical_id in sandbox.stack.schedules if logical_id.startswith("SpendMeter")]


def advance_until(
    sandbox: Sandbox, drain: Callable[[], list[dict[str, Any]]], wanted: Callable[[dict[str, Any]], bool]
) -> tuple[list[dict[str, Any]], float]:
    """Advance the clock an hour at a time (the fleet's spend accrues; Budgets refreshes every 8 h) until
    an alert matches; every alert seen, and the simulated hours it took."""
    seen: list[dict[str, Any]] = []
    for hour in range(1, MAX_HOURS + 1):
        sandbox.advance(HOUR)
        sandbox.settle(10.0)  # deliveries of the hour (a busy machine may leave some for the next)
        seen += drain()
        if any(wanted(a) for a in seen):
            return seen, hour
    raise AssertionError(f"no such alert in {MAX_HOURS} simulated hours; got {seen}")


def deliveries(sandbox: Sandbox, budget: str, threshold: float, kind: str = "ACTUAL") -> list[Any]:
    return [
        d
        for d in sandbox.budgets.deliveries
        if d.budget_name == budget
        and d.subscription_type == "SNS"
        and d.notification["NotificationType"] == kind
        and float(d.notification["Threshold"]) == threshold
    ]


def fleet_rate(sandbox: Sandbox, cluster: str) -> Decimal:
    nodes = sandbox.client("sagemaker").list_cluster_nodes(ClusterName=cluster)["ClusterNodeSummaries"]
    return sum((price_per_hour(n["InstanceType"]) for n in nodes), Decimal(0))


def test_spend_crossing_80_percent_gives_one_alert_with_the_right_figures(
    api: Any,
    sandbox: Sandbox,
    alerts: Callable[[], list[dict[str, Any]]],
    workshop_request: Callable[..., dict[str, Any]],
) -> None:
    # The workshop cluster burns ~$397/h: a refresh (every 8 h, ~$3,200 apart) lands between 80 % and
    # 100 % of $20,000 (a $4,000 window) whatever the hour the nodes came up.
    body = workshop_request("e2e-budget", budget={"monthlyLimitUsd": 20000, "alertEmails": []})
    create(api, sandbox, body)
    drain = alerts

    seen, _ = advance_until(
        sandbox, drain, lambda a: a["alertType"] == "ACTUAL" and a["thresholdPercent"] == "80"
    )

    eighty = [a for a in seen if a["alertType"] == "ACTUAL" and a["thresholdPercent"] == "80"]
    notified = deliveries(sandbox, "hyperpod-e2e-budget", 80)
    assert len(notified) == 2  # AWS Budgets notified the crossing twice ...
    assert len({d.message_id for d in notified}) == 2
    assert len(eighty) == 1  # ... and one alert went out
    [alert] = eighty
    stated = re.search(r"ACTUAL Amount: \$([\d,.]+)", notified[0].message)
    assert stated is not None
    spend = sandbox.client("budgets").describe_budget(
        AccountId=sandbox.account_id, BudgetName="hyperpod-e2e-budget"
    )["Budget"]["CalculatedSpend"]
    assert alert["clusterName"] == "e2e-budget"
    assert (alert["owner"], alert["project"]) == ("alice", body["project"])
    assert alert["budgetUsd"] == "20000.00"
    assert alert["thresholdUsd"] == "16000.00"
    assert Decimal(alert["notifiedAmountUsd"]) == Decimal(stated.group(1).replace(",", ""))
    assert Decimal("16000") < Decimal(alert["actualUsd"]) <= Decimal("20000")
    assert Decimal(alert["actualUsd"]) == Decimal(spend["ActualSpend"]["Amount"])
    assert Decimal(alert["forecastUsd"]) == Decimal(spend["ForecastedSpend"]["Amount"])
    assert alert["period"] == "2026-11"
    assert alert["clusterUrl"].endswith("/clusters/e2e-budget")
    assert alert["enforcement"] is None
    # the spend meter's figure (none where the template has no spend meter)
    rate = alert["hourlyRateUsd"] and Decimal(alert["hourlyRateUsd"])
    assert rate == (fleet_rate(sandbox, "e2e-budget") if spend_meter_schedules(sandbox) else None)

    # Later refreshes keep the spend above 80 %: Budgets says nothing more, and nor does Autopilot.
    later: list[dict[str, Any]] = []
    for _ in range(9):
        sandbox.advance(HOUR)
        sandbox.settle(10.0)
        later += drain()
    assert not [
        a for a in later if a["budgetName"] == "hyperpod-e2e-budget" and a["thresholdPercent"] == "80"
    ]


def test_at_100_percent_scale_to_min_scales_the_worker_groups_down(
    api: Any,
    sandbox: Sandbox,
    alerts: Callable[[], list[dict[str, Any]]],
    workshop_request: Callable[..., dict[str, Any]],
) -> None:
    body = workshop_request(
        "e2e-scale", budget={"monthlyLimitUsd": 5000, "alertEmails": [], "enforcement": "scale-to-min"}
    )
    workers = next(
        g for g in body["clusterConfig"]["InstanceGroups"] if g["InstanceGroupName"] == "worker-group-1"
    )
    workers["MinInstanceCount"] = 1
    create(api, sandbox, body)
    sagemaker = sandbox.client("sagemaker")

    def at_100(alert: dict[str, Any]) -> bool:
        return (alert["clusterName"], alert["alertType"], alert["thresholdPercent"]) == (
            "e2e-scale",
            "ACTUAL",
            "100",
        )

    seen, _ = advance_until(sandbox, alerts, at_100)

    [alert] = [a for a in seen if at_100(a)]  # notified twice, alerted (and enforced) once
    assert len(deliveries(sandbox, "hyperpod-e2e-scale", 100)) == 2
    enforcement = alert["enforcement"]
    assert (enforcement["mode"], enforcement["result"]) == ("scale-to-min", "done")
    assert enforcement["instanceCounts"] == {"worker-group-1": [4, 1]}
    groups = {
        g["InstanceGroupName"]: g
        for g in sagemaker.describe_cluster(ClusterName="e2e-scale")["InstanceGroups"]
    }
    assert groups["worker-group-1"]["TargetCount"] == 1  # its MinInstanceCount
    assert groups["controller-machine"]["TargetCount"] == 1  # untouched
    assert groups["login-group"]["TargetCount"] == 1
    operation = api.get_operation(enforcement["operationId"])
    assert (operation["kind"], operation["status"]) == ("ScaleToMin", "SUCCEEDED")
    view = api.get_cluster("e2e-scale")
    assert view["budgetEnforcement"] == "scale-to-min"
    assert enforcement["operationId"] in [h["operationId"] for h in view["history"]]

    deadline = time.monotonic() + OPERATION_TIMEOUT_S  # HyperPod finishes the scale-down
    while sagemaker.describe_cluster(ClusterName="e2e-scale")["ClusterStatus"] != "InService":
        assert time.monotonic() < deadline, "the scale-down did not finish"
        sandbox.advance(60)
    nodes = sagemaker.list_cluster_nodes(ClusterName="e2e-scale")["ClusterNodeSummaries"]
    assert sorted(n["InstanceGroupName"] for n in nodes) == [
        "controller-machine",
        "login-group",
        "worker-group-1",
    ]
