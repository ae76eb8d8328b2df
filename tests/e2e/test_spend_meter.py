"""The spend meter end to end in the sandbox, driven only by simulated AWS activity.

A cluster with a budget is created through the API; its nodes run on the HyperPod simulator and the
sandbox clock is stepped by hand (frozen clock), so the spend meter's schedule (every 15 simulated
minutes), the Price List API it asks, and AWS Budgets' refreshes (midnight and every 8 hours UTC) all
follow the same simulated time. What the test observes is what an operator would: GET
/clusters/{name}/cost, the alerts topic, and when AWS Budgets notified.

The clock starts at 08:05 UTC on the 10th: the cluster is up by ~08:30, and Budgets' next refresh is at
16:00, so whichever alert comes first is decided by the two services' cadences, not by the machine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from autopilot_cli.client import ApiError

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from sandbox.services.pricing.list_prices import DEFAULT_PRICES

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
CLUSTER = "e2e-spend"
BUDGET_USD = 2500
SCHEDULE = "SpendMeterFunctionSpendMeterSchedule"
START = datetime(2026, 11, 10, 8, 5, tzinfo=UTC)
DEADLINE_S = 120.0
BILLABLE = {"Running", "Failure", "SystemUpdating", "DeepHealthCheckInProgress"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=DEMO_PARAMETERS, clock=SandboxClock(speed=0, start=START)) as running:
        yield running


def wait_for[T](check: Callable[[], T | None], *, what: str, sandbox: Sandbox, step: float = 30) -> T:
    """Poll ``check`` until it returns something, moving the simulated clock ``step`` s a round."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        sandbox.advance(step)
        sandbox.settle()
    raise AssertionError(f"no {what} within {DEADLINE_S} s")


def _alerts_queue(sandbox: Sandbox) -> str:
    sqs = sandbox.client("sqs")
    url = sqs.create_queue(QueueName="e2e-spend-alerts")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sandbox.client("sns").subscribe(
        TopicArn=sandbox.stack.outputs["AlertsTopicArn"],
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    return str(url)


def _spend_alerts(sandbox: Sandbox, queue_url: str) -> list[dict[str, Any]]:
    sqs = sandbox.client("sqs")
    found = []
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
            try:
                body = json.loads(message["Body"])
            except ValueError:
                continue  # another alert's plain text
            if (
                isinstance(body, dict)
                and body.get("alert") == "SpendForecast"
                and body["clusterName"] == CLUSTER
            ):
                found.append(body)
    return found


def _budget_notices(sandbox: Sandbox) -> list[Any]:
    return [d for d in sandbox.budgets.deliveries if d.budget_name == f"hyperpod-{CLUSTER}"]


def _list_price_rate(sandbox: Sandbox) -> Decimal:
    """What the nodes cost an hour at sandbox/services/pricing/list_prices.py's list prices, from
    ListClusterNodes."""
    pages = sandbox.client("sagemaker").get_paginator("list_cluster_nodes").paginate(ClusterName=CLUSTER)
    return sum(
        (
            DEFAULT_PRICES[node["InstanceType"]]
            for page in pages
            for node in page["ClusterNodeSummaries"]
            if node["InstanceStatus"]["Status"] in BILLABLE
        ),
        Decimal(0),
    )


@pytest.fixture(scope="module")
def created(sandbox: Sandbox, api: Any, workshop_request: Callable[..., dict[str, Any]]) -> str:
    queue = _alerts_queue(sandbox)
    body = workshop_request(CLUSTER, budget={"monthlyLimitUsd": BUDGET_USD, "alertEmails": []})
    accepted = api.create_cluster(body)
    done = wait_for(
        lambda: op if (op := api.get_operation(accepted["operationId"]))["status"] != "RUNNING" else None,
        what="finished create",
        sandbox=sandbox,
    )
    assert done["status"] == "SUCCEEDED", done.get("error")
    return queue


def test_unknown_cluster_has_no_cost(api: Any) -> None:
    with pytest.raises(ApiError) as raised:
        api.get_cost("no-such-cluster")
    assert raised.value.status == 404


def test_the_cost_shows_the_list_prices_of_the_running_nodes(
    sandbox: Sandbox, api: Any, created: str
) -> None:
    runs = int(sandbox.metrics()["scheduled_events"].get(SCHEDULE, 0))
    wait_for(
        lambda: True if int(sandbox.metrics()["scheduled_events"].get(SCHEDULE, 0)) > runs else None,
        what="spend meter run",
        sandbox=sandbox,
    )
    assert sandbox.settle()
    cost = wait_for(
        lambda: found if (found := api.get_cost(CLUSTER))["asOf"] is not None else None,
        what="metered cost",
        sandbox=sandbox,
    )
    assert set(cost) == {"hourlyRateUsd", "monthToDateUsd", "forecastUsd", "budgetUsd", "asOf"}
    rate = _list_price_rate(sandbox)
    assert rate == Decimal("396.96")  # 4 x ml.p5.48xlarge + ml.m5.12xlarge + ml.m5.4xlarge
    assert Decimal(str(cost["hourlyRateUsd"])) == rate
    assert cost["budgetUsd"] == BUDGET_USD
    assert 0 < cost["monthToDateUsd"] < cost["forecastUsd"]
    # the function asked the Price List API, as its role allows, and nothing was refused
    assert sandbox.metrics()["aws_calls"].get("pricing:GetProducts", 0) >= 1
    denied = [d for d in sandbox.metrics()["iam_denials"] if "SpendMeterFunctionRole" in d["principal"]]
    assert denied == []


def test_the_forecast_alert_fires_before_aws_budgets_does(sandbox: Sandbox, created: str) -> None:
    alerts = wait_for(
        lambda: _spend_alerts(sandbox, created) or None, what="spend forecast alert", sandbox=sandbox
    )
    alerted_at = sandbox.clock.now()
    assert _budget_notices(sandbox) == []  # Budgets has not refreshed since the nodes started
    assert {a["thresholdPercent"] for a in alerts} == {80, 100}
    first = alerts[0]
    assert Decimal(first["hourlyRateUsd"]) == _list_price_rate(sandbox)
    assert Decimal(first["budgetUsd"]) == BUDGET_USD
    assert Decimal(first["forecastUsd"]) >= BUDGET_USD

    # AWS Budgets catches up at its next refresh (16:00 UTC), hours later, and the meter stays quiet
    notices = wait_for(
        lambda: _budget_notices(sandbox) or None, what="budget notification", sandbox=sandbox, step=900
    )
    assert min(n.sent_at for n in notices) > alerted_at
    assert min(n.sent_at for n in notices).hour == 16
    assert _spend_alerts(sandbox, created) == []  # once per threshold and month
