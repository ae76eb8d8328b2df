"""BudgetAlertsFunction: one alert per (budget, threshold, period) whatever the notifications, its figures."""

# ruff: noqa: F811  (the tests name fixtures imported from budget_alerts_support.py)
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from autopilot.dal.budget_alerts import AlertKey, ClaimResult
from autopilot.logic import budget_alerts
from autopilot.logic.budget_alert_retry import retry_unfinished
from autopilot.logic.budget_alerts import AlertInFlightError, Handled, handle_notification

from tests.unit.budget_alerts_support import (
    ALERTS,
    API_URL,
    EVENT_MESSAGE,
    NOW,
    OVER,
    World,
    cluster,
    crossing,
    world,  # noqa: F401 (a fixture the tests name)
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
