"""Nothing dies silently, end to end in the sandbox through the signed HTTP API.

An execution stopped by hand (StopExecution → ABORTED → EventBridge → RecordOutcomeFunction) leaves
its operation FAILED with the cause within a simulated minute, and the cluster's name is usable again;
an operation whose StartExecution never happened is failed by ReconcilerFunction on its schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from autopilot.dal.state_table import StateTable
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    Operation,
    OperationStatus,
    OperationType,
    new_operation_id,
)
from autopilot_cli.client import AutopilotClient

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.harness.core import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    # A frozen clock: a create stays Creating and its workflow in its wait until the test advances
    # time, and the reconciler's schedule (every 5 simulated minutes) fires only then.
    with Sandbox(parameters=DEMO_PARAMETERS, speed=0) as running:
        yield running


def wait_for[T](check: Callable[[], T | None], *, advance: Sandbox | None = None, what: str) -> T:
    """Poll ``check`` until it returns something (moving the clock 30 s a round when ``advance``)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        if advance is not None:
            advance.advance(30)
        time.sleep(0.2)  # 5 polls a second: well under the stage's throttle (ApiThrottlingRateLimit 25/s)
    raise AssertionError(f"no {what} within {DEADLINE_S} s")


def waiting(sfn: Any, execution_arn: str) -> bool:
    """The execution is idle: in a Wait state or a task waiting for its token."""
    events = sfn.get_execution_history(executionArn=execution_arn)["events"]
    return max(events, key=lambda event: event["id"])["type"] in ("WaitStateEntered", "TaskSubmitted")


def operation_in(api: AutopilotClient, operation_id: str, *statuses: str) -> dict[str, Any] | None:
    operation = api.get_operation(operation_id)
    return operation if operation["status"] in statuses else None


def test_an_aborted_create_is_failed_with_its_cause_and_frees_the_name(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    sagemaker, sfn = sandbox.client("sagemaker"), sandbox.client("stepfunctions")
    accepted = api.create_cluster(workshop_request("e2e-aborted"))
    operation_id = accepted["operationId"]
    execution_arn = api.get_operation(operation_id)["executionArn"]
    wait_for(
        lambda: (
            [c for c in sagemaker.list_clusters()["ClusterSummaries"] if c["ClusterName"] == "e2e-aborted"]
            or None
        ),
        what="cluster in SageMaker",
    )
    # Stop it while it waits for the cluster, as an operator would: not in the middle of a task.
    wait_for(lambda: waiting(sfn, execution_arn) or None, what="execution waiting for the cluster")

    stopped_at = sandbox.clock.now()
    sfn.stop_execution(executionArn=execution_arn)
    failed = wait_for(lambda: operation_in(api, operation_id, "FAILED"), what="FAILED operation")

    assert sandbox.clock.now() - stopped_at < timedelta(
        minutes=1
    )  # frozen: the event did it, not the schedule
    assert failed["error"]["error"] == "Autopilot.ExecutionAborted"
    assert execution_arn in failed["error"]["cause"]
    assert "ABORTED" in failed["error"]["cause"]
    assert sfn.describe_execution(executionArn=execution_arn)["status"] == "ABORTED"
    assert api.get_cluster("e2e-aborted")["status"] == "CREATE_FAILED"  # SageMaker: still Creating

    # No longer 409: the half-made cluster can be deleted, and then its name taken again.
    deleting = api.delete_cluster("e2e-aborted")
    deleted = wait_for(
        lambda: operation_in(api, deleting["operationId"], "SUCCEEDED", "FAILED"),
        advance=sandbox,
        what="finished cleanup",
    )
    assert deleted["status"] == "SUCCEEDED", deleted.get("error")
    again = api.create_cluster(workshop_request("e2e-aborted"))
    assert again["status"] == "RUNNING"
    assert sandbox.metrics()["iam_denials"] == []  # every call made had its permission in the template


def test_an_operation_whose_workflow_never_started_is_failed_by_the_reconciler(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    # What the API records before StartExecution, left so by a StartExecution that never happened.
    store = StateTable(sandbox.stack.resources["StateTable"].physical_id, client=sandbox.client("dynamodb"))
    at = sandbox.clock.now()
    operation_id = new_operation_id(at)
    store.start_create(
        Cluster(cluster_name="e2e-unstarted", status=ClusterStatus.CREATING, created_at=at, updated_at=at,
                last_operation_id=operation_id),
        Operation(operation_id=operation_id, operation_type=OperationType.CREATE_CLUSTER,
                  cluster_name="e2e-unstarted", status=OperationStatus.RUNNING, created_at=at, updated_at=at),
    )  # fmt: skip
    fired_before = sandbox.metrics()["scheduled_events"].get("ReconcilerFunctionReconcile", 0)

    sandbox.advance(6 * 60)  # past one schedule and the grace period
    failed = wait_for(lambda: operation_in(api, operation_id, "FAILED"), what="FAILED operation")

    assert sandbox.metrics()["scheduled_events"]["ReconcilerFunctionReconcile"] > fired_before
    assert failed["error"]["error"] == "Autopilot.WorkflowNotStarted"
    assert api.get_cluster("e2e-unstarted")["status"] == "CREATE_FAILED"
    assert api.create_cluster(workshop_request("e2e-unstarted"))["status"] == "RUNNING"  # not 409
    assert sandbox.metrics()["iam_denials"] == []
