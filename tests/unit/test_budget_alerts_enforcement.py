"""BudgetAlertsFunction's enforcement modes: scale to min, block growth, and lifting a growth block."""

# ruff: noqa: F811  (the tests name fixtures imported from budget_alerts_support.py)
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from autopilot.dal.state_table import StateTable
from autopilot.errors import NotFoundError
from autopilot.logic import budget_alerts
from autopilot.logic.authorize_delete import NotAllowedError
from autopilot.logic.budget_alert_retry import retry_unfinished
from autopilot.logic.budget_alerts import Handled, handle_notification
from autopilot.logic.budget_enforcement import GrowthBlockedError, ensure_growth_allowed
from autopilot.logic.lift_growth_block import lift_growth_block
from autopilot.models.records import ClusterStatus, OperationStatus, OperationType

from tests.unit.budget_alerts_support import (
    ACCOUNT,
    NOW,
    OVER,
    TABLE,
    World,
    cluster,
    crossing,
    world,  # noqa: F401 (a fixture the tests name)
)


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
