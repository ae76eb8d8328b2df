"""The Create workflow on moto's Step Functions executor, against the HyperPod simulator.

The API starts each execution (so the input is exactly what production sends); ``wait`` hands the
cluster-events queue to ClusterEventsFunction's logic, and the clock is frozen and stepped so each
path is deterministic: the event resumes the wait, a lost event falls back to DescribeCluster,
throttling is retried, a failure re-describes before any rollback, the deadline holds.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from autopilot.logic import create_cluster as create_cluster_module
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.read_clusters import get_cluster, get_operation
from autopilot.models.bodies import CreateClusterBody

from tests.integration.workflows import deliver_cluster_events, dependencies, entered, history, start, wait
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
STEP = 60.0  # simulated seconds a wait round advances the frozen clock


def test_a_create_with_deep_health_checks_gets_their_time_on_top_of_its_deadline(make_stack: Any) -> None:
    # The workers run OnStartDeepHealthChecks: the cluster is Creating for 20 min + ~2 h of checks (AWS:
    # "about a couple of hours" per new instance), past CreateTimeoutSeconds' 7200 s alone, which failed
    # (and could roll back) a create working as designed. DeepHealthCheckMinutes is added to it.
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    timings = stack.hyperpod.timings
    assert timings.create_cluster + timings.deep_health_check > 7200
    operation_id = start(deep_health_checks=True)

    execution = wait(stack, operation_id, advance=STEP, timeout=180.0)

    assert execution["status"] == "SUCCEEDED"
    assert get_operation(dependencies(), operation_id).status == "SUCCEEDED"


def test_happy_path_resumes_on_the_state_change_event(make_stack: Any) -> None:
    # no fallback check within the test: the cluster's InService event is what ends the wait
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    operation_id = start()

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, execution["executionArn"]))
    assert states.count("Await Cluster") == 1
    assert "Check Cluster" not in states
    operation = get_operation(dependencies(), operation_id)
    assert operation.status == "SUCCEEDED"
    assert [s.name for s in operation.steps] == [
        "Create Cluster",
        "Wait For Cluster",
        "Tag Cluster",
        "Create Budget",
    ]
    assert operation.cluster_arn == json.loads(execution["output"])["ClusterArn"]
    cluster = get_cluster(dependencies(), "ml-cluster")
    assert cluster.status == "ACTIVE"
    assert cluster.sagemaker is not None
    assert cluster.sagemaker.ClusterStatus == "InService"

    tags = stack.client("sagemaker").list_tags(ResourceArn=operation.cluster_arn)["Tags"]
    assert {"Key": "autopilot:operation-id", "Value": operation_id} in tags
    assert {"Key": "owner", "Value": "ann"} in tags
    budgets = stack.client("budgets")
    budget = budgets.describe_budget(AccountId="123456789012", BudgetName="hyperpod-ml-cluster")["Budget"]
    assert float(budget["BudgetLimit"]["Amount"]) == 25000
    assert budget["CostFilters"] == {"TagKeyValue": ["user:ClusterName$ml-cluster"]}
    notifications = budgets.describe_notifications_for_budget(
        AccountId="123456789012", BudgetName="hyperpod-ml-cluster"
    )["Notifications"]
    assert sorted((n["NotificationType"], n["Threshold"]) for n in notifications) == [
        ("ACTUAL", 50.0),
        ("ACTUAL", 80.0),
        ("ACTUAL", 100.0),
        ("FORECASTED", 100.0),
    ]
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Succeeded"
    assert operation.cluster_arn in event["resources"]
    assert event["detail"] == {
        "operationId": operation_id,
        "operationType": "CreateCluster",
        "clusterName": "ml-cluster",
        "status": "SUCCEEDED",
        "executionArn": execution["executionArn"],
    }


def test_a_lost_event_is_covered_by_the_fallback_check(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=300)
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=STEP, events=False)  # nobody answers the wait

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, execution["executionArn"]))
    # HyperPod takes 20 simulated minutes: the wait times out every 5 and DescribeCluster is asked
    assert states.count("Check Cluster") >= 3
    assert states.count("Await Cluster") == states.count("Check Cluster")
    assert get_cluster(dependencies(), "ml-cluster").status == "ACTIVE"


def _continuous_eks_body(**changes: Any) -> dict[str, Any]:
    """The sample create as an EKS cluster with NodeProvisioningMode Continuous (botocore: EKS only)."""
    body = create_body(**changes)
    del body["provisioningParameters"]
    body["clusterConfig"]["Orchestrator"] = {
        "Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/ml-eks"}
    }
    body["clusterConfig"]["NodeProvisioningMode"] = "Continuous"
    return body


def _start_body(body: dict[str, Any]) -> str:
    return create_cluster(
        dependencies(), CreateClusterBody.model_validate(body), requested_by="tester"
    ).operation_id


def test_every_member_create_cluster_accepts_reaches_sagemaker(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    operation_id = _start_body(_continuous_eks_body(budget=None))

    assert wait(stack, operation_id, advance=STEP)["status"] == "SUCCEEDED"

    described = stack.client("sagemaker").describe_cluster(ClusterName="ml-cluster")
    assert described["NodeProvisioningMode"] == "Continuous"


def test_a_continuous_cluster_short_of_capacity_succeeds_with_a_warning_and_is_not_rolled_back(
    make_stack: Any,
) -> None:
    """NodeProvisioningMode Continuous: InService with no worker at all is a success with the shortfall
    as a warning (HyperPod goes on launching in the background), never a failure or a rollback."""
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge", times=1000)
    operation_id = _start_body(_continuous_eks_body(budget=None))  # rollbackOnFailure: true

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, execution["executionArn"]))
    assert "Check Capacity" in states
    assert "Roll Back Cluster" not in states
    operation = get_operation(dependencies(), operation_id)
    assert operation.status == "SUCCEEDED"
    assert not operation.rolled_back
    assert operation.warnings == [
        "partial capacity: instance group worker-group-1 has 0 of 4 instances; HyperPod launches the rest "
        "as capacity allows (NodeProvisioningMode Continuous; failed launches: ListClusterEvents)"
    ]
    assert get_cluster(dependencies(), "ml-cluster").status == "ACTIVE"
    described = stack.client("sagemaker").describe_cluster(ClusterName="ml-cluster")
    assert described["ClusterStatus"] == "InService"
    events = stack.client("sagemaker").list_cluster_events(ClusterName="ml-cluster", ResourceType="Instance")
    failed = [e for e in events["Events"] if e["EventLevel"] == "Error"]
    assert failed
    assert {e["InstanceGroupName"] for e in failed} == {"worker-group-1"}


def test_a_full_continuous_cluster_has_no_capacity_warning(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    operation_id = _start_body(_continuous_eks_body(budget=None))

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    assert "Check Capacity" in entered(history(stack, execution["executionArn"]))
    assert get_operation(dependencies(), operation_id).warnings == []


def test_cluster_failure_is_recorded_rolled_back_and_notified(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge")
    operation_id = start()  # rollbackOnFailure: true in the sample event

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    assert execution["error"] == "Autopilot.CreateClusterFailed"
    states = entered(history(stack, execution["executionArn"]))
    assert "Check Cluster" not in states  # the Failed event answered the wait
    operation = get_operation(dependencies(), operation_id)
    assert operation.status == "FAILED"
    assert operation.error is not None
    assert operation.error.error == "Autopilot.ClusterFailed"
    assert "InsufficientInstanceCapacity" in operation.error.cause
    assert [s.name for s in operation.steps] == ["Create Cluster", "Wait For Cluster", "Roll Back Cluster"]
    assert operation.rolled_back is True
    assert get_cluster(dependencies(), "ml-cluster").status == "CREATE_FAILED"
    stack.clock.advance(3600)
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"
    assert event["detail"]["error"] == "Autopilot.ClusterFailed"


def test_without_rollback_the_failed_cluster_is_kept(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge")
    operation_id = start(rollbackOnFailure=False)

    assert wait(stack, operation_id, advance=STEP)["status"] == "FAILED"

    operation = get_operation(dependencies(), operation_id)
    assert "Roll Back Cluster" not in [s.name for s in operation.steps]
    assert operation.rolled_back is False
    [summary] = stack.client("sagemaker").list_clusters()["ClusterSummaries"]
    assert summary["ClusterStatus"] == "Failed"


def test_throttled_calls_are_retried_to_success(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=120)
    stack.aws_calls.apply_fault(
        "throttling",
        {
            "rate": 0.5,
            "services": ["sagemaker"],
            "operations": ["CreateCluster", "DescribeCluster", "AddTags"],
            "seed": 3,
        },
    )
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=STEP, events=False)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, execution["executionArn"])
    failed = [e for e in events if e["type"] == "TaskFailed"]
    assert failed, "the seeded plan throttles at least one call"
    # unmodelled errors surface as <Service>.<Service>Exception, which the SageMaker policy retries
    assert {e["taskFailedEventDetails"]["error"] for e in failed} == {"SageMaker.SageMakerException"}
    assert get_operation(dependencies(), operation_id).warnings == []


def test_a_resource_the_tagger_cannot_tag_is_a_warning_and_keeps_the_cluster(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    # CostTaggerFunction's own call (the workflow's Tag Cluster step invokes it)
    stack.aws_calls.apply_fault(
        "throttling", {"rate": 1.0, "services": ["sagemaker"], "operations": ["ListTags"]}
    )
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    operation = get_operation(dependencies(), operation_id)  # as GET /operations/{id} shows it
    assert operation.warnings == [f"cost tags not applied to {operation.cluster_arn}: ThrottlingException"]
    assert "Tag Cluster" in [s.name for s in operation.steps]
    assert get_cluster(dependencies(), "ml-cluster").status == "ACTIVE"
    assert (
        stack.client("sagemaker").describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] == "InService"
    )


def test_a_tagger_that_cannot_run_is_a_warning(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    # the function's role may not read the state table: every invocation fails, and so do the retries
    # (its policies all go: SAM writes a policy template as a policy of its own)
    role = _role_name(stack, "CostTaggerFunction")
    for name in stack.client("iam").list_role_policies(RoleName=role)["PolicyNames"]:
        stack.client("iam").delete_role_policy(RoleName=role, PolicyName=name)
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    operation = get_operation(dependencies(), operation_id)
    assert operation.warnings == ["cost tags not applied: ClientError"]
    assert "Tag Cluster" not in [s.name for s in operation.steps]


def _role_name(stack: Any, function: str) -> str:
    role_arn = stack.client("lambda").get_function(FunctionName=stack.stack.physical_id(function))[
        "Configuration"
    ]["Role"]
    return str(role_arn.rsplit("/", 1)[1])


def test_tag_cluster_tags_what_the_cluster_uses_and_the_project_gets_its_budget(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    ec2, s3 = stack.client("ec2"), stack.client("s3")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="efa", Description="EFA", VpcId=vpc)["GroupId"]
    s3.create_bucket(Bucket="sagemaker-lifecycle-123456789012")
    s3.put_bucket_tagging(
        Bucket="sagemaker-lifecycle-123456789012", Tagging={"TagSet": [{"Key": "team", "Value": "platform"}]}
    )
    file_system = stack.client("fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet]
    )["FileSystem"]
    body = create_body(costCenter="cc-42", budget={"monthlyLimitUsd": 100, "projectMonthlyLimitUsd": 900})
    body["clusterConfig"]["VpcConfig"] = {"SecurityGroupIds": [group], "Subnets": [subnet]}
    body["provisioningParameters"]["fsx_dns_name"] = file_system["DNSName"]
    operation_id = create_cluster(
        dependencies(), CreateClusterBody.model_validate(body), requested_by="tester"
    ).operation_id

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    operation = get_operation(dependencies(), operation_id)
    assert [s.name for s in operation.steps][2:] == ["Tag Cluster", "Create Budget", "Create Project Budget"]
    assert operation.warnings == []
    wanted = {
        "ClusterName": "ml-cluster",
        "owner": "ann",
        "project": "llm-pretraining",
        "cost-center": "cc-42",
    }
    bucket = s3.get_bucket_tagging(Bucket="sagemaker-lifecycle-123456789012")["TagSet"]
    assert {t["Key"]: t["Value"] for t in bucket} == {"team": "platform", **wanted}
    [described] = stack.client("fsx").describe_file_systems(FileSystemIds=[file_system["FileSystemId"]])[
        "FileSystems"
    ]
    assert {t["Key"]: t["Value"] for t in described["Tags"]} == wanted
    [sg] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert {t["Key"]: t["Value"] for t in sg["Tags"]} == wanted
    project = stack.client("budgets").describe_budget(
        AccountId="123456789012", BudgetName="hyperpod-project.llm-pretraining"
    )["Budget"]
    assert float(project["BudgetLimit"]["Amount"]) == 900
    assert project["CostFilters"] == {"TagKeyValue": ["user:project$llm-pretraining"]}


def test_another_teams_security_group_keeps_its_owner_tag_and_the_create_warns(make_stack: Any) -> None:
    # issue 20: a config naming finance's security group re-tagged it owner=<requester>, and the drift
    # sweep kept it so. The group is left as it is; the operation says why.
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    ec2 = stack.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="finance", Description="finance", VpcId=vpc)["GroupId"]
    ec2.create_tags(Resources=[group], Tags=[{"Key": "owner", "Value": "finance"}])
    body = create_body(budget=None)
    body["clusterConfig"]["VpcConfig"] = {"SecurityGroupIds": [group], "Subnets": [subnet]}
    operation_id = create_cluster(
        dependencies(), CreateClusterBody.model_validate(body), requested_by="tester"
    ).operation_id

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    [sg] = ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"]
    assert {t["Key"]: t["Value"] for t in sg["Tags"]} == {"owner": "finance"}
    [warning] = get_operation(dependencies(), operation_id).warnings
    group_arn = f"arn:aws:ec2:us-east-1:123456789012:security-group/{group}"
    assert warning.startswith(f"cost tags not applied to {group_arn}")
    assert "owner=finance" in warning


def test_a_cluster_that_never_comes_up_times_out_and_is_rolled_back(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, CreateTimeoutSeconds=120, FallbackPollSeconds=3600)
    operation_id = start()  # HyperPod takes 20 simulated minutes; the deadline is 2

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    operation = get_operation(dependencies(), operation_id)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.Timeout"
    assert (
        operation.error.cause == "cluster ml-cluster was still Creating at the deadline (InService expected)"
    )
    assert operation.rolled_back is True  # still Creating when re-described: never InService
    assert get_cluster(dependencies(), "ml-cluster").status == "CREATE_FAILED"


def test_create_cluster_rejected_by_sagemaker_is_not_rolled_back(
    make_stack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = make_stack(clock_speed=0)
    config = {k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"}
    # race: the cluster is created meanwhile, after the name was checked
    monkeypatch.setattr(create_cluster_module, "_check_name_free", lambda deps, name: None)
    stack.client("sagemaker").create_cluster(**config)

    operation_id = create_cluster(
        dependencies(), CreateClusterBody.model_validate(create_body()), requested_by="t"
    ).operation_id
    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    operation = get_operation(dependencies(), operation_id)
    assert operation.error is not None
    assert operation.error.error == "SageMaker.ResourceInUseException"
    # refused, not adopted: the cluster does not carry this operation's autopilot:operation-id tag
    assert operation.error.cause == (
        f"a cluster named ml-cluster exists that this operation did not create (no autopilot:operation-id "
        f"tag {operation_id}): left as it is, neither adopted nor deleted"
    )
    assert "Read Cluster Tags" in entered(history(stack, execution["executionArn"]))
    assert operation.steps == []
    assert operation.cluster_arn is None
    assert operation.rolled_back is False  # rollbackOnFailure is on: still never deleted
    assert get_cluster(dependencies(), "ml-cluster").status == "CREATE_FAILED"
    stack.clock.advance(3600)
    stack.hyperpod.tick()
    assert stack.client("sagemaker").describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] != "Deleting"


@pytest.mark.parametrize(
    ("answer", "failures"),
    [
        # the 5xx is retried, and the retry finds the name taken by the cluster the first call created
        ("server_error", ["SageMaker.SageMakerException", "SageMaker.ResourceInUseException"]),
        # the sandbox's name for a task whose call timed out (unverified): not retried, caught
        ("timeout", ["States.TaskFailed"]),
    ],
)
def test_a_create_whose_answer_was_lost_adopts_the_cluster_it_created(
    make_stack: Any, answer: str, failures: list[str]
) -> None:
    # the longest deadline: however long HyperPod takes, only the adoption can fail this
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600, CreateTimeoutSeconds=82800)
    stack.aws_calls.apply_fault(
        "lost_response",
        {"rate": 1, "services": ["sagemaker"], "operations": ["CreateCluster"], "times": 1, "answer": answer},
    )
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=10 * STEP)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, execution["executionArn"])
    create_failures = [
        e["taskFailedEventDetails"]["error"]
        for e in events
        if e["type"] == "TaskFailed" and e["taskFailedEventDetails"]["resource"] == "createCluster"
    ]
    assert create_failures == failures
    [summary] = stack.client("sagemaker").list_clusters()["ClusterSummaries"]  # one cluster: nothing leaked
    operation = get_operation(dependencies(), operation_id)
    assert operation.status == "SUCCEEDED"
    assert operation.cluster_arn == summary["ClusterArn"] == json.loads(execution["output"])["ClusterArn"]
    assert operation.warnings is not None
    assert operation.warnings[0] == (
        f"CreateCluster failed ({failures[-1]}) after it took effect: adopted {summary['ClusterArn']}, "
        "tagged with this operation"
    )
    assert [s.name for s in operation.steps][:2] == ["Create Cluster", "Wait For Cluster"]
    cluster = get_cluster(dependencies(), "ml-cluster")
    assert cluster.status == "ACTIVE"
    assert summary["ClusterStatus"] == "InService"


def test_a_create_that_never_took_effect_fails_without_looking_further(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.aws_calls.apply_fault(
        "server_error", {"rate": 1, "services": ["sagemaker"], "operations": ["CreateCluster"]}
    )
    operation_id = start(budget=None)

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    operation = get_operation(dependencies(), operation_id)
    assert operation.error is not None
    assert operation.error.error == "SageMaker.SageMakerException"
    assert operation.warnings == []
    states = entered(history(stack, execution["executionArn"]))
    assert "Look For Cluster" in states
    assert "Read Cluster Tags" not in states  # DescribeCluster: no such cluster
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []
    assert get_cluster(dependencies(), "ml-cluster").status == "CREATE_FAILED"


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


def test_a_forged_failed_answer_during_a_create_does_not_roll_back_a_healthy_cluster(make_stack: Any) -> None:
    """Were a forged "Cluster State Change: Failed" to reach the wait (ClusterEventsFunction drops one
    it cannot authenticate: tests/unit/test_cluster_events.py), DescribeCluster still decides: the
    cluster is Creating, so nothing is deleted and the create goes on to succeed (issue 20)."""
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    operation_id = start(budget=None)  # rollbackOnFailure: true
    sfn = stack.client("stepfunctions")

    def forge(body: dict[str, Any], sent_at: int, waits: Any) -> str:
        if body.get("autopilot") != "await-cluster":
            return "ignored"
        sfn.send_task_success(
            taskToken=body["taskToken"],
            output=json.dumps({"ClusterStatus": "Failed", "FailureMessage": "forged"}),
        )
        return "forged"

    # the first wait request is answered by the forger, while HyperPod is still creating the cluster
    deadline = time.monotonic() + 30
    while "forged" not in deliver_cluster_events(stack, forge):
        assert time.monotonic() < deadline, "the create never asked to wait"
        time.sleep(0.05)

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, execution["executionArn"]))
    assert "Recheck Cluster" in states  # the forged Failed was checked with SageMaker
    assert "Roll Back Cluster" not in states
    operation = get_operation(dependencies(), operation_id)
    assert operation.status == "SUCCEEDED"
    assert operation.rolled_back is not True
    [summary] = stack.client("sagemaker").list_clusters()["ClusterSummaries"]
    assert summary["ClusterStatus"] == "InService"
