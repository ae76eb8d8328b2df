"""The Cleanup workflow on moto's Step Functions executor, against the HyperPod simulator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from autopilot.logic.delete_cluster import delete_cluster
from autopilot.logic.instance_group_spec import group_spec
from autopilot.logic.read_clusters import get_cluster, get_operation

from sandbox.harness.stack import Deployed
from tests.integration.workflows import dependencies, entered, history, start, wait
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

ACCOUNT = "123456789012"
# The clusters here are made straight in SageMaker (no creator on record): only an admin may delete them.
ADMIN = f"arn:aws:iam::{ACCOUNT}:user/tester"
STEP = 60.0  # simulated seconds a wait round advances the frozen clock


def running_cluster(stack: Deployed, name: str = "ml-cluster") -> str:
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    arn = stack.client("sagemaker").create_cluster(**config, Tags=[{"Key": "ClusterName", "Value": name}])
    stack.clock.advance(3600)
    stack.hyperpod.tick()
    return str(arn["ClusterArn"])


def budget(stack: Deployed, name: str = "hyperpod-ml-cluster") -> None:
    stack.client("budgets").create_budget(
        AccountId=ACCOUNT,
        Budget={
            "BudgetName": name,
            "BudgetLimit": {"Amount": "100", "Unit": "USD"},
            "TimeUnit": "MONTHLY",
            "BudgetType": "COST",
        },
    )


def budgets(stack: Deployed) -> list[str]:
    found = stack.client("budgets").describe_budgets(AccountId=ACCOUNT).get("Budgets", [])
    return [b["BudgetName"] for b in found]


def vpc_stack(stack: Deployed, cluster: str | None) -> None:
    stack.client("cloudformation").create_stack(
        StackName="ml-cluster-vpc",
        TemplateBody=json.dumps({"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}),
        Tags=[{"Key": "ClusterName", "Value": cluster}] if cluster else [],
    )


def stacks(stack: Deployed) -> list[tuple[str, str]]:
    summaries = stack.client("cloudformation").list_stacks()["StackSummaries"]
    return [(s["StackName"], s["StackStatus"]) for s in summaries]


def test_cleanup_deletes_cluster_budget_and_stack_and_reports_leftovers(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN, FallbackPollSeconds=3600)
    running_cluster(stack)
    budget(stack)
    vpc_stack(stack, "ml-cluster")
    s3 = stack.client("s3")
    s3.create_bucket(Bucket="ml-cluster-checkpoints")
    s3.put_bucket_tagging(
        Bucket="ml-cluster-checkpoints", Tagging={"TagSet": [{"Key": "ClusterName", "Value": "ml-cluster"}]}
    )

    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name="ml-cluster-vpc", requested_by=ADMIN)
    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, execution["executionArn"]))
    # HyperPod sends no event when a cluster is gone: the fallback check ends this wait
    assert states.count("Check Cluster") == 1
    assert "Wait For Stack" in states  # DeleteStack is awaited (DELETE_COMPLETE)
    operation = get_operation(dependencies(), accepted.operation_id)
    assert operation.status == "SUCCEEDED"
    assert [s.name for s in operation.steps] == [
        "Delete Cluster",
        "Wait For Deletion",
        "Delete Budget",
        "Delete Stack",
        "Check Leftovers",
    ]
    assert operation.leftovers == ["arn:aws:s3:::ml-cluster-checkpoints"]
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []
    assert budgets(stack) == []
    assert stacks(stack) == [("ml-cluster-vpc", "DELETE_COMPLETE")]
    assert get_cluster(dependencies(), "ml-cluster").status == "DELETED"
    # the wait ended on its own check, so nobody answered its waiter: the table's TTL removes it
    [waiter] = stack.client("dynamodb").query(
        TableName=stack.stack.physical_id("StateTable"),
        KeyConditionExpression="pk = :pk AND begins_with(sk, :waiter)",
        ExpressionAttributeValues={":pk": {"S": "CLUSTER#ml-cluster"}, ":waiter": {"S": "WAITER#"}},
    )["Items"]
    assert int(waiter["expiresAt"]["N"]) > int(waiter["sentAt"]["N"]) // 1000
    ttl = stack.client("dynamodb").describe_time_to_live(TableName=stack.stack.physical_id("StateTable"))
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expiresAt"
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Succeeded"
    assert event["detail"]["operationType"] == "DeleteCluster"
    assert json.loads(event["detail"]["leftovers"]) == ["arn:aws:s3:::ml-cluster-checkpoints"]


def test_a_stack_not_tagged_with_the_cluster_is_never_deleted(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN, FallbackPollSeconds=300)
    running_cluster(stack)
    vpc_stack(stack, "ml-cluster")

    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name="ml-cluster-vpc", requested_by=ADMIN)
    # The API checked the tag; the workflow checks it again when it gets to the stack (retagged since).
    stack.client("cloudformation").update_stack(
        StackName="ml-cluster-vpc",
        UsePreviousTemplate=True,
        Tags=[{"Key": "ClusterName", "Value": "another-cluster"}],
    )
    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    operation = get_operation(dependencies(), accepted.operation_id)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.StackNotTagged"
    assert operation.error.cause == "stack ml-cluster-vpc is not tagged ClusterName=ml-cluster"
    assert stacks(stack) == [("ml-cluster-vpc", "UPDATE_COMPLETE")]  # retagged, not deleted
    # the cluster itself is gone, and the registry says so
    assert get_cluster(dependencies(), "ml-cluster").status == "DELETED"


def test_cleanup_of_a_cluster_already_gone_still_cleans_the_rest(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN)
    running_cluster(stack)
    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name=None, requested_by=ADMIN)
    stack.client("sagemaker").delete_cluster(ClusterName="ml-cluster")  # someone was faster
    stack.clock.advance(3600)

    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    operation = get_operation(dependencies(), accepted.operation_id)
    assert operation.leftovers == []  # and no budget existed: NotFound is fine
    assert [s.name for s in operation.steps] == ["Delete Cluster", "Check Leftovers"]


def test_cleanup_waits_out_a_delete_already_under_way(make_stack: Any) -> None:
    # A second DeleteCluster on a Deleting cluster is a ConflictException: retried, not a failed cleanup,
    # until the cluster is gone (ResourceNotFound: deleted).
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN)
    running_cluster(stack)
    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name=None, requested_by=ADMIN)
    stack.client("sagemaker").delete_cluster(ClusterName="ml-cluster")  # someone else's, still Deleting

    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, execution["executionArn"])
    failed = [e["taskFailedEventDetails"]["error"] for e in events if "taskFailedEventDetails" in e]
    assert failed[0] == "SageMaker.ConflictException"
    assert "SageMaker.ResourceNotFoundException" in failed
    assert get_cluster(dependencies(), "ml-cluster").status == "DELETED"


def test_cleanup_of_a_cluster_being_updated_deletes_it_once_the_update_ends(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN, FallbackPollSeconds=300)
    running_cluster(stack)
    sagemaker = stack.client("sagemaker")
    for _ in range(12):  # deep health checks may hold a create beyond running_cluster's hour
        if sagemaker.describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] == "InService":
            break
        stack.clock.advance(1800)
    workers = sagemaker.describe_cluster(ClusterName="ml-cluster")["InstanceGroups"][-1]
    scaled = group_spec(workers, workers["TargetCount"] - 1)  # Updating for 3 simulated minutes
    sagemaker.update_cluster(ClusterName="ml-cluster", InstanceGroups=[scaled])

    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name=None, requested_by=ADMIN)
    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, execution["executionArn"])
    failed = [e["taskFailedEventDetails"]["error"] for e in events if "taskFailedEventDetails" in e]
    assert "SageMaker.ConflictException" in failed
    assert "Wait For Deletion" in [s.name for s in get_operation(dependencies(), accepted.operation_id).steps]
    assert sagemaker.list_clusters()["ClusterSummaries"] == []


def test_cleanup_that_never_finishes_times_out(make_stack: Any) -> None:
    stack = make_stack(
        clock_speed=0, AdminPrincipalArns=ADMIN, DeleteTimeoutSeconds=60, FallbackPollSeconds=3600
    )
    running_cluster(stack)  # HyperPod deletes in 5 simulated minutes; the deadline is 1

    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name=None, requested_by=ADMIN)
    execution = wait(stack, accepted.operation_id, advance=20)

    assert execution["status"] == "FAILED"
    assert execution["error"] == "Autopilot.CleanupClusterFailed"
    operation = get_operation(dependencies(), accepted.operation_id)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.Timeout"
    assert get_cluster(dependencies(), "ml-cluster").status == "DELETE_FAILED"
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"


def test_the_project_budget_goes_with_the_projects_last_cluster(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN, FallbackPollSeconds=300)
    project_budget = "hyperpod-project.llm-pretraining"
    for name in ("first", "second"):  # the second finds the project's budget there (its limit holds)
        created = start(name, budget={"projectMonthlyLimitUsd": 900})
        assert wait(stack, created, advance=STEP)["status"] == "SUCCEEDED"
    assert budgets(stack) == [project_budget]

    first = delete_cluster(dependencies(), "first", stack_name=None, requested_by=ADMIN)
    execution = wait(stack, first.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    assert budgets(stack) == [project_budget]  # "second" still runs
    assert "Release Project Budget" not in [
        s.name for s in get_operation(dependencies(), first.operation_id).steps
    ]

    last = delete_cluster(dependencies(), "second", stack_name=None, requested_by=ADMIN)
    execution = wait(stack, last.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    assert budgets(stack) == []
    assert "Release Project Budget" in [
        s.name for s in get_operation(dependencies(), last.operation_id).steps
    ]
