"""The Create workflow on moto's Step Functions executor, against the HyperPod simulator.

The API starts each execution (so the input is exactly what production sends); the simulator's
clock runs fast or is frozen to drive each path: happy, cluster failure (+ rollback), throttling
retries, deadline, bad input.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from autopilot.api.models import CreateClusterBody

from tests.events import create_body
from tests.integration.workflows import entered, history, operations, start, wait

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_happy_path_creates_tags_budgets_records_and_notifies(make_stack: Any) -> None:
    stack = make_stack(clock_speed=4000)  # 20 simulated minutes of creation in 0.3 s
    operation_id = start()

    execution = wait(stack, operation_id)

    assert execution["status"] == "SUCCEEDED"
    operation = operations().get_operation(operation_id)
    assert operation.status == "SUCCEEDED"
    assert [s.name for s in operation.steps] == [
        "Create Cluster",
        "Wait For Cluster",
        "Tag Cluster",
        "Create Budget",
        "Succeeded",
    ]
    assert operation.cluster_arn
    assert operation.cluster_arn == json.loads(execution["output"])["ClusterArn"]
    cluster = operations().get_cluster("ml-cluster")
    assert cluster.status == "ACTIVE"
    assert cluster.sagemaker
    assert cluster.sagemaker.ClusterStatus == "InService"

    tags = stack.client("sagemaker").list_tags(ResourceArn=operation.cluster_arn)["Tags"]
    assert {"Key": "autopilot:operation-id", "Value": operation_id} in tags
    assert {"Key": "owner", "Value": "ann"} in tags

    budget = stack.client("budgets").describe_budget(
        AccountId="123456789012", BudgetName="hyperpod-ml-cluster"
    )
    assert float(budget["Budget"]["BudgetLimit"]["Amount"]) == 25000
    assert budget["Budget"]["BudgetLimit"]["Unit"] == "USD"
    assert budget["Budget"]["CostFilters"] == {"TagKeyValue": ["user:ClusterName$ml-cluster"]}
    notifications = stack.client("budgets").describe_notifications_for_budget(
        AccountId="123456789012", BudgetName="hyperpod-ml-cluster"
    )["Notifications"]
    assert sorted((n["NotificationType"], n["Threshold"]) for n in notifications) == [
        ("ACTUAL", 50.0),
        ("ACTUAL", 80.0),
        ("ACTUAL", 100.0),
        ("FORECASTED", 100.0),
    ]

    [event] = stack.operation_events()
    assert event["source"] == "hyperpod.autopilot"
    assert event["detail-type"] == "Cluster Operation Succeeded"
    assert operation.cluster_arn in event["resources"]  # Step Functions adds its own ARNs too
    assert event["detail"] == {
        "operationId": operation_id,
        "operationType": "CreateCluster",
        "clusterName": "ml-cluster",
        "status": "SUCCEEDED",
        "executionArn": execution["executionArn"],
    }


def test_without_a_budget_the_budget_step_is_skipped(make_stack: Any) -> None:
    stack = make_stack(clock_speed=4000)
    operation_id = start(budget=None)

    assert wait(stack, operation_id)["status"] == "SUCCEEDED"

    steps = [s.name for s in operations().get_operation(operation_id).steps]
    assert "Create Budget" not in steps
    assert operations().get_cluster("ml-cluster").budget_name is None


def test_cluster_failure_is_recorded_rolled_back_and_notified(make_stack: Any) -> None:
    stack = make_stack(clock_speed=4000)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge")
    operation_id = start()  # rollbackOnFailure: true in the sample event

    execution = wait(stack, operation_id)

    assert execution["status"] == "FAILED"
    assert execution["error"] == "Autopilot.CreateClusterFailed"
    operation = operations().get_operation(operation_id)
    assert operation.status == "FAILED"
    assert operation.error is not None
    assert operation.error.error == "Autopilot.ClusterFailed"
    assert "InsufficientInstanceCapacity" in operation.error.cause
    assert "ml.p5.48xlarge" in operation.error.cause
    assert [s.name for s in operation.steps][-2:] == ["Roll Back Cluster", "Failed"]
    assert operation.rolled_back is True
    assert operations().get_cluster("ml-cluster").status == "CREATE_FAILED"
    stack.clock.advance(3600)
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"
    assert event["detail"]["error"] == "Autopilot.ClusterFailed"


def test_without_rollback_the_failed_cluster_is_kept(make_stack: Any) -> None:
    stack = make_stack(clock_speed=4000)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge")
    operation_id = start(rollbackOnFailure=False)

    assert wait(stack, operation_id)["status"] == "FAILED"

    assert "Roll Back Cluster" not in [s.name for s in operations().get_operation(operation_id).steps]
    [summary] = stack.client("sagemaker").list_clusters()["ClusterSummaries"]
    assert summary["ClusterStatus"] in ("Failed", "RollingBack")


def test_throttled_describe_calls_are_retried(make_stack: Any) -> None:
    stack = make_stack(clock_speed=1000)
    stack.hyperpod.fault_throttling(rate=0.5, operations=["DescribeCluster"], seed=3)
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, timeout=120)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, execution["executionArn"])
    failed = [e for e in events if e["type"] == "TaskFailed"]
    assert failed, "the seeded throttling plan throttles at least one DescribeCluster"
    # unmodelled errors surface as <service>.<Service>Exception; the cause carries the message
    assert {e["taskFailedEventDetails"]["error"] for e in failed} == {"SageMaker.SageMakerException"}
    assert all("Rate exceeded" in e["taskFailedEventDetails"]["cause"] for e in failed)
    assert "Record Failure" not in entered(events)


def test_a_cluster_that_never_comes_up_times_out(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, CreateTimeoutSeconds=60)  # frozen clock: Creating forever
    ops = operations()
    ops._settings = ops._settings.model_copy(update={"create_timeout_seconds": 3})
    body = CreateClusterBody.model_validate(create_body(rollbackOnFailure=False))
    operation_id = ops.create_cluster(body, requested_by="tester").operation_id

    execution = wait(stack, operation_id, timeout=60)

    assert execution["status"] == "FAILED"
    operation = operations().get_operation(operation_id)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.Timeout"
    assert operation.error.cause == "cluster ml-cluster was still Creating after 3 polls 1 s apart"
    assert [s.name for s in operation.steps] == ["Create Cluster", "Wait For Cluster", "Failed"]


def test_create_cluster_rejected_by_sagemaker_goes_to_the_failure_path(make_stack: Any) -> None:
    stack = make_stack(clock_speed=4000)
    config = {k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"}
    ops = operations()
    ops._check_name_free = lambda name: None  # type: ignore[method-assign]  # race: created meanwhile
    stack.client("sagemaker").create_cluster(**config)
    body = CreateClusterBody.model_validate(create_body())

    operation_id = ops.create_cluster(body, requested_by="tester").operation_id
    execution = wait(stack, operation_id)

    assert execution["status"] == "FAILED"
    operation = operations().get_operation(operation_id)
    assert operation.error is not None
    assert operation.error.error.endswith("ResourceInUseException")
    assert [s.name for s in operation.steps] == ["Create Cluster", "Failed"]  # no rollback: not ours


def test_bad_input_fails_fast_without_touching_anything(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    sfn = stack.client("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=stack.stack.arn("CreateClusterStateMachine"), input=json.dumps({"clusterName": "x"})
    )["executionArn"]

    for _ in range(50):
        execution = sfn.describe_execution(executionArn=arn)
        if execution["status"] != "RUNNING":
            break
        time.sleep(0.1)

    assert execution["status"] == "FAILED"
    assert execution["error"] == "Autopilot.InvalidInput"
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []
