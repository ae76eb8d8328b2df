"""The REST API through the Powertools resolver, on the template deployed into moto (not executed)."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.dal.state_table import StateTable
from autopilot.idempotency import IdempotencyKeyInProgressError, IdempotentRequest
from autopilot.logic import read_clusters
from autopilot.models.bodies import OperationAccepted
from autopilot.models.records import OperationStatus
from autopilot.settings import api_settings
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from sandbox.harness.stack import Deployed, deployed
from tests.samples import ROOT, api_event, create_body

USER_ARN = "arn:aws:sts::123456789012:assumed-role/ResearcherRole/researcher"


@dataclass
class LambdaContext:
    function_name: str = "ApiFunction"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ApiFunction"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        return 25_000


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Test")
    with deployed(execute=False) as d:
        for key, value in d.environment().items():
            monkeypatch.setenv(key, value)
        api_settings.cache_clear()
        routes.deps.cache_clear()
        aws.client.cache_clear()
        yield d
    api_settings.cache_clear()
    routes.deps.cache_clear()
    aws.client.cache_clear()


def call(event: dict[str, Any]) -> tuple[int, Any]:
    response = routes.app.resolve(event, LambdaContext())
    body = response["body"]
    return response["statusCode"], json.loads(body) if body else None


def create(name: str = "ml-cluster", **changes: Any) -> tuple[int, Any]:
    return call(api_event("create_cluster", body=create_body(name, **changes)))


def with_key(event: dict[str, Any], key: str, *, caller: str | None = None) -> dict[str, Any]:
    """The event with an Idempotency-Key header (spelled as a client might), optionally another caller."""
    event["headers"]["idempotency-key"] = key
    if caller is not None:
        event["requestContext"]["identity"]["userArn"] = caller
    return event


def executions(stack: Deployed, logical_id: str) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.stack.arn(logical_id))["executions"]
    return [sfn.describe_execution(executionArn=e["executionArn"]) for e in listed]


def problems(body: dict[str, Any]) -> set[tuple[str | None, str]]:
    return {(e.get("file") or e.get("location"), e["path"]) for e in body["errors"]}


# --- POST /clusters ---------------------------------------------------------------------------


def test_create_starts_the_workflow_and_records_the_operation(stack: Deployed) -> None:
    status, body = create()

    assert status == 202
    assert body["clusterName"] == "ml-cluster"
    assert body["status"] == "RUNNING"
    [execution] = executions(stack, "CreateClusterStateMachine")
    assert execution["name"] == body["operationId"]
    workflow_input = json.loads(execution["input"])
    assert workflow_input["rollbackOnFailure"] is True
    tags = {t["Key"]: t["Value"] for t in workflow_input["createClusterRequest"]["Tags"]}
    assert tags == {
        "project": "llm-pretraining",
        "ClusterName": "ml-cluster",
        "owner": "ann",
        "autopilot:operation-id": body["operationId"],
    }
    assert len(workflow_input["createClusterRequest"]["Tags"]) == 4  # the config's project tag not doubled
    assert workflow_input["budget"] == {
        "budgetName": "hyperpod-ml-cluster",
        "limitAmount": "25000.00",
        "costFilter": "user:ClusterName$ml-cluster",
        "subscribers": [
            {"SubscriptionType": "SNS", "Address": stack.stack.physical_id("BudgetNotificationsTopic")},
            {"SubscriptionType": "EMAIL", "Address": "ann@example.com"},
        ],
    }

    status, operation = call(api_event("get_operation", path_parameters={"operationId": body["operationId"]}))
    assert status == 200
    assert operation["kind"] == "CreateCluster"
    assert operation["status"] == "RUNNING"
    assert operation["executionArn"] == execution["executionArn"]
    assert operation["requestedBy"] == USER_ARN

    status, cluster = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
    assert status == 200
    assert cluster["status"] == "CREATING"
    assert cluster["budgetName"] == "hyperpod-ml-cluster"
    assert cluster["sagemaker"] is None  # the workflow has not created it yet
    assert [h["operationId"] for h in cluster["history"]] == [body["operationId"]]


def test_a_dry_run_shows_the_create_and_creates_nothing(stack: Deployed) -> None:
    status, plan = call(api_event("create_cluster", body=create_body(), query={"dryRun": "true"}))

    assert status == 200
    assert plan["clusterName"] == "ml-cluster"
    tags = {t["Key"]: t["Value"] for t in plan["createClusterRequest"]["Tags"]}
    assert tags["owner"] == "ann"
    assert tags["autopilot:operation-id"] == "assigned-at-create"
    assert plan["budget"]["limitAmount"] == "25000.00"
    assert plan["projectBudget"] is None
    assert len(plan["checks"]) == 6
    assert executions(stack, "CreateClusterStateMachine") == []
    status, _ = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
    assert status == 404
    assert create()[0] == 202  # the dry run took neither the name nor an idempotency record


def _target_group(stack: Deployed, name: str, target_type: str = "ip") -> str:
    ec2 = stack.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(
        stack.client("elbv2").create_target_group(
            Name=name, Protocol="TCP", Port=22, VpcId=vpc, TargetType=target_type
        )["TargetGroups"][0]["TargetGroupArn"]
    )


def test_create_checks_and_stores_the_login_target_groups(stack: Deployed) -> None:
    ssh = _target_group(stack, "autopilot-login-ssh")
    by_instance = _target_group(stack, "autopilot-login-inst", target_type="instance")
    unknown = ssh.rsplit("/", 1)[0] + "/0123456789abcdef"
    other_account = ssh.replace(":123456789012:", ":210987654321:")

    status, body = create(loginTargetGroupArns=[ssh, by_instance, unknown, other_account])

    assert status == 400
    messages = {e["path"]: e["message"] for e in body["errors"]}
    assert set(messages) == {
        "loginTargetGroupArns[1]",
        "loginTargetGroupArns[2]",
        "loginTargetGroupArns[3]",
    }
    assert "'instance'" in messages["loginTargetGroupArns[1]"]
    assert "no such target group" in messages["loginTargetGroupArns[2]"]
    assert "account 123456789012" in messages["loginTargetGroupArns[3]"]
    assert executions(stack, "CreateClusterStateMachine") == []

    status, body = create(loginTargetGroupArns=[ssh])

    assert status == 202
    [execution] = executions(stack, "CreateClusterStateMachine")
    assert json.loads(execution["input"])["loginTargetGroupArns"] == [ssh]
    status, _ = create("other", loginTargetGroupArns=[ssh] * 6)
    assert status == 400
    record = StateTable(stack.environment()["STATE_TABLE_NAME"]).get_cluster("ml-cluster")
    assert record is not None
    assert record.login_target_group_arns == [ssh]


def test_a_dry_run_fails_as_the_create_would(stack: Deployed) -> None:
    assert create()[0] == 202

    status, answer = call(api_event("create_cluster", body=create_body(), query={"dryRun": "true"}))

    assert status == 409
    assert "ml-cluster" in answer["message"]


def test_create_lists_every_config_problem_with_its_path(stack: Deployed) -> None:
    body = create_body()
    body["clusterConfig"]["InstanceGroups"][1]["ThreadsPerCore"] = 3
    body["clusterConfig"]["NodeRecovery"] = "Manual"
    body["clusterConfig"]["AutoScaling"] = {"Mode": "Enable"}

    status, answer = call(api_event("create_cluster", body=body))

    assert status == 400
    assert answer["message"] == "the cluster configuration is invalid"
    found = problems(answer)
    assert ("cluster-config.json", "InstanceGroups[1].ThreadsPerCore") in found
    assert ("cluster-config.json", "NodeRecovery") in found
    assert ("cluster-config.json", "AutoScaling.Mode") in found  # Karpenter needs EKS
    assert executions(stack, "CreateClusterStateMachine") == []


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"owner": None}, "owner"),
        ({"budget": {"monthlyLimitUsd": -5}}, "budget.monthlyLimitUsd"),
        ({"budget": {"monthlyLimitUsd": 10, "alertEmails": ["not-an-address"]}}, "budget.alertEmails[0]"),
        ({"project": "a|b"}, "project"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_create_names_the_body_field_that_is_wrong(
    stack: Deployed, change: dict[str, Any], path: str
) -> None:
    body = create_body()
    for key, value in change.items():
        if value is None:
            del body[key]
        else:
            body[key] = value

    status, answer = call(api_event("create_cluster", body=body))

    assert status == 400
    assert ("body", path) in problems(answer)
    assert all(set(e) <= {"path", "message", "location", "file"} for e in answer["errors"])


def test_create_rejects_a_body_that_is_not_json(stack: Deployed) -> None:
    status, answer = call(api_event("create_cluster", raw_body="{not json"))

    assert status == 400
    assert answer["errors"][0]["location"] == "body"


def test_create_rejects_a_tag_that_contradicts_the_request(stack: Deployed) -> None:
    status, answer = create(project="other-project")

    assert status == 400
    assert problems(answer) == {("cluster-config.json", "Tags[0].Value")}


def test_create_rejects_too_many_tags(stack: Deployed) -> None:
    body = create_body()
    body["clusterConfig"]["Tags"] = [{"Key": f"k{i}", "Value": "v"} for i in range(48)]

    status, answer = call(api_event("create_cluster", body=body))

    assert status == 400
    assert problems(answer) == {("cluster-config.json", "Tags")}


def test_create_conflicts_with_a_registered_name(stack: Deployed) -> None:
    assert create()[0] == 202

    status, answer = create()

    assert status == 409
    assert "ml-cluster" in answer["message"]


def test_create_conflicts_with_a_cluster_autopilot_did_not_create(stack: Deployed) -> None:
    sagemaker = stack.client("sagemaker")
    sagemaker.create_cluster(**{k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"})

    status, answer = create()

    assert status == 409
    assert "already exists" in answer["message"]


def test_create_when_the_workflow_cannot_start_records_the_failure(stack: Deployed) -> None:
    sfn = stack.client("stepfunctions")
    sfn.delete_state_machine(stateMachineArn=stack.stack.arn("CreateClusterStateMachine"))

    status, answer = create()

    assert status == 503
    status, operation = call(
        api_event("get_operation", path_parameters={"operationId": answer["operationId"]})
    )
    assert operation["status"] == "FAILED"
    assert operation["error"]["error"].startswith("StepFunctions.")
    status, cluster = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
    assert cluster["status"] == "CREATE_FAILED"
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"
    assert event["detail"]["operationId"] == answer["operationId"]
    assert create()[0] == 503  # the name is free again (the workflow is still missing)


# --- Idempotency-Key ----------------------------------------------------------------------------


def test_a_retried_create_with_the_same_key_gets_the_same_operation(stack: Deployed) -> None:
    first = call(with_key(api_event("create_cluster", body=create_body()), "retry-1"))
    again = call(with_key(api_event("create_cluster", body=create_body()), "retry-1"))

    assert first[0] == again[0] == 202
    assert again[1] == first[1]
    assert len(executions(stack, "CreateClusterStateMachine")) == 1
    [record] = stack.client("dynamodb").scan(TableName=stack.stack.physical_id("IdempotencyTable"))["Items"]
    assert record["status"] == {"S": "COMPLETED"}


def test_the_same_key_with_a_different_body_is_422_naming_the_header(stack: Deployed) -> None:
    assert call(with_key(api_event("create_cluster", body=create_body()), "retry-1"))[0] == 202

    status, answer = call(with_key(api_event("create_cluster", body=create_body(owner="bob")), "retry-1"))

    assert status == 422
    assert "Idempotency-Key" in answer["message"]
    assert problems(answer) == {("header", "Idempotency-Key")}
    assert len(executions(stack, "CreateClusterStateMachine")) == 1


def test_without_a_key_a_retried_create_conflicts_as_before(stack: Deployed) -> None:
    assert create()[0] == 202

    status, answer = create()

    assert status == 409
    assert "taken" in answer["message"]
    assert stack.client("dynamodb").scan(TableName=stack.stack.physical_id("IdempotencyTable"))["Items"] == []


def test_keys_belong_to_one_caller(stack: Deployed) -> None:
    assert call(with_key(api_event("create_cluster", body=create_body()), "k"))[0] == 202

    other = "arn:aws:sts::123456789012:assumed-role/ResearcherRole/someone-else"
    status, answer = call(with_key(api_event("create_cluster", body=create_body()), "k", caller=other))

    assert status == 409  # not the first caller's answer: the request runs, and the name is taken
    assert "taken" in answer["message"]


def test_a_rejected_request_is_not_remembered(stack: Deployed) -> None:
    bad = create_body()
    bad["clusterConfig"]["InstanceGroups"][1]["ThreadsPerCore"] = 3
    assert call(with_key(api_event("create_cluster", body=bad), "k"))[0] == 400

    status, _ = call(with_key(api_event("create_cluster", body=create_body()), "k"))

    assert status == 202


def test_a_retried_delete_with_the_same_key_gets_the_same_operation(stack: Deployed) -> None:
    _registered_active(stack, "ml-cluster")
    cluster_stack(stack, "ml-cluster-vpc", {"ClusterName": "ml-cluster"})

    first = call(with_key(api_event("delete_cluster"), "del-1"))
    again = call(with_key(api_event("delete_cluster"), "del-1"))
    other_stack = call(with_key(api_event("delete_cluster", query={"stackName": "other"}), "del-1"))

    assert first[0] == again[0] == 202
    assert again[1] == first[1]
    assert len(executions(stack, "CleanupClusterStateMachine")) == 1
    assert other_stack[0] == 422
    assert call(api_event("delete_cluster"))[0] == 409  # without the key: the cleanup is running


@pytest.mark.parametrize("key", ["", "has space", "x" * 256])
def test_a_malformed_key_is_400_naming_the_header(stack: Deployed, key: str) -> None:
    status, answer = call(with_key(api_event("create_cluster", body=create_body()), key))

    assert status == 400
    assert problems(answer) == {("header", "Idempotency-Key")}


def test_a_key_whose_first_request_is_still_running_is_409(stack: Deployed) -> None:
    idempotency = routes.deps().idempotency
    request = IdempotentRequest(key="k", caller=USER_ARN, action="CreateCluster", request={"n": 1})
    accepted = OperationAccepted(operation_id="op-1", cluster_name="c", status=OperationStatus.RUNNING)

    def first() -> OperationAccepted:
        # the same key arrives again while the first request is still being handled
        with pytest.raises(IdempotencyKeyInProgressError, match="Idempotency-Key 'k' is still in progress"):
            idempotency.run(request, lambda: accepted)
        return accepted

    assert idempotency.run(request, first, lambda_context=LambdaContext()) == accepted
    assert idempotency.run(request, lambda: pytest.fail("replayed, not run")) == accepted


# --- GET /clusters, /clusters/{name}, /clusters/{name}/nodes ----------------------------------


def test_list_pages_through_registered_clusters(stack: Deployed) -> None:
    for name in ("alpha", "bravo", "charlie"):
        assert create(name)[0] == 202

    status, first = call(api_event("list_clusters", query={"limit": "2"}))
    assert status == 200
    status, second = call(api_event("list_clusters", query={"limit": "2", "nextToken": first["nextToken"]}))

    names = [c["clusterName"] for c in first["clusters"] + second["clusters"]]
    assert names == ["alpha", "bravo", "charlie"]
    assert second.get("nextToken") is None


def test_list_skips_deleted_clusters_in_full_pages(stack: Deployed) -> None:
    table = stack.stack.physical_id("StateTable")
    live = {"c03", "c07", "c11"}
    for n in range(12):
        name = f"c{n:02d}"
        stack.client("dynamodb").put_item(
            TableName=table,
            Item={
                "pk": {"S": f"CLUSTER#{name}"},
                "sk": {"S": f"CLUSTER#{name}"},
                "kind": {"S": "CLUSTER"},
                "clusterName": {"S": name},
                "status": {"S": "ACTIVE" if name in live else "DELETED"},
                "createdAt": {"S": "2025-11-21T14:00:00.000Z"},
                "updatedAt": {"S": "2025-11-21T14:00:00.000Z"},
                "lastOperationId": {"S": "op-1"},
            },
        )

    _, first = call(api_event("list_clusters", query={"limit": "2"}))
    _, second = call(api_event("list_clusters", query={"limit": "2", "nextToken": first["nextToken"]}))
    _, everything = call(api_event("list_clusters", query={"limit": "100", "includeDeleted": "true"}))

    assert [c["clusterName"] for c in first["clusters"]] == ["c03", "c07"]
    assert [c["clusterName"] for c in second["clusters"]] == ["c11"]
    assert second["nextToken"] is None
    assert len(everything["clusters"]) == 12


def test_list_rejects_a_forged_page_token(stack: Deployed) -> None:
    status, answer = call(api_event("list_clusters", query={"nextToken": "bm90LWEtdG9rZW4"}))

    assert status == 400
    assert problems(answer) == {("query", "nextToken")}


def test_list_rejects_a_limit_out_of_range(stack: Deployed) -> None:
    status, answer = call(api_event("list_clusters", query={"limit": "1000"}))

    assert status == 400
    assert problems(answer) == {("query", "limit")}


def test_get_cluster_adds_the_live_sagemaker_status(stack: Deployed, monkeypatch: pytest.MonkeyPatch) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("live")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)

    status, cluster = call(api_event("get_cluster", path_parameters={"name": "live"}))

    assert status == 200
    assert cluster["status"] is None  # not created through Autopilot
    assert cluster["sagemaker"]["ClusterStatus"] == "Creating"
    assert [g["InstanceGroupName"] for g in cluster["sagemaker"]["InstanceGroups"]] == [
        "controller-machine",
        "login-group",
        "worker-group-1",
    ]


def test_unknown_cluster_is_404(stack: Deployed) -> None:
    status, answer = call(api_event("get_cluster", path_parameters={"name": "nope"}))

    assert status == 404
    assert answer == {"message": "cluster 'nope' not found"}


def test_invalid_cluster_name_is_400_naming_the_path_parameter(stack: Deployed) -> None:
    status, answer = call(api_event("get_cluster", path_parameters={"name": "-bad-"}))

    assert status == 400
    assert problems(answer) == {("path", "name")}


def test_nodes_come_from_list_cluster_nodes_page_by_page(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("nodes")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    stack.clock.advance(3 * 3600)  # the create, then the workers' deep health checks (about 2 h)

    status, first = call(
        api_event("list_cluster_nodes", path_parameters={"name": "nodes"}, query={"limit": "4"})
    )
    status, second = call(
        api_event(
            "list_cluster_nodes",
            path_parameters={"name": "nodes"},
            query={"limit": "4", "nextToken": first["nextToken"]},
        )
    )

    assert status == 200
    nodes = first["nodes"] + second["nodes"]
    assert len(nodes) == 6  # 1 controller + 1 login + 4 workers
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Running"}
    assert second.get("nextToken") is None
    # SageMaker's times spelled as every other time the API answers: UTC, milliseconds, Z
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", n["LaunchTime"]) for n in nodes)
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "nodes"}))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", cluster["sagemaker"]["CreationTime"])


def test_login_nodes_show_their_target_health(stack: Deployed) -> None:
    ssh, web = _target_group(stack, "autopilot-login-ssh"), _target_group(stack, "autopilot-login-web")
    assert create("lb", loginTargetGroupArns=[ssh, web])[0] == 202
    config = {k: v for k, v in create_body("lb")["clusterConfig"].items() if k != "Tags"}
    for group in config["InstanceGroups"]:  # the login group named by its Slurm node type
        group["SlurmConfig"] = {
            "NodeType": "Login" if group["InstanceGroupName"] == "login-group" else "Compute"
        }
    sagemaker = stack.client("sagemaker")
    sagemaker.create_cluster(**config)
    stack.clock.advance(3 * 3600)
    [login] = [
        n
        for n in sagemaker.list_cluster_nodes(ClusterName="lb")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "login-group"
    ]
    ip = sagemaker.describe_cluster_node(ClusterName="lb", NodeId=login["InstanceId"])["NodeDetails"][
        "PrivatePrimaryIp"
    ]
    stack.client("elbv2").register_targets(TargetGroupArn=ssh, Targets=[{"Id": ip, "Port": 22}])

    status, answer = call(api_event("list_cluster_nodes", path_parameters={"name": "lb"}))

    assert status == 200
    shown = {n["InstanceId"]: n.get("loadBalancer") for n in answer["nodes"]}
    [state] = {t["state"] for t in shown[login["InstanceId"]] if t["targetGroupArn"] == ssh}
    assert state in {"initial", "healthy"}
    assert [(t["targetGroupArn"], t["port"]) for t in shown[login["InstanceId"]]] == [(ssh, 22), (web, 22)]
    assert shown[login["InstanceId"]][1]["state"] == "unregistered"
    assert [i for i, lb in shown.items() if lb is not None] == [login["InstanceId"]]


def test_a_node_page_token_sagemaker_did_not_issue_is_400(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("nodes")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)

    status, answer = call(
        api_event("list_cluster_nodes", path_parameters={"name": "nodes"}, query={"nextToken": "forged"})
    )

    assert status == 400
    assert problems(answer) == {("query", "nextToken")}


def test_nodes_of_an_unknown_cluster_is_404(stack: Deployed) -> None:
    status, _ = call(api_event("list_cluster_nodes", path_parameters={"name": "nope"}))

    assert status == 404


# --- DELETE /clusters/{name} ------------------------------------------------------------------


def _registered_active(stack: Deployed, name: str) -> str:
    status, body = create(name)
    assert status == 202
    ddb = stack.client("dynamodb")
    ddb.update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": f"CLUSTER#{name}"}, "sk": {"S": f"CLUSTER#{name}"}},
        UpdateExpression="SET #s = :active",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":active": {"S": "ACTIVE"}},
    )
    return str(body["operationId"])


def cluster_stack(stack: Deployed, stack_name: str, tags: dict[str, str]) -> str:
    """A CloudFormation stack (e.g. the cluster's VPC/FSx stack) with these stack tags; its StackId."""
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
    created = stack.client("cloudformation").create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(template),
        Tags=[{"Key": key, "Value": value} for key, value in tags.items()],
    )
    return str(created["StackId"])


def as_admin(monkeypatch: pytest.MonkeyPatch, *arns: str) -> None:
    """Redeploy-free AdminPrincipalArns: the function reads the setting on its next cold start."""
    monkeypatch.setenv("ADMIN_PRINCIPAL_ARNS", ",".join(arns))
    api_settings.cache_clear()
    routes.deps.cache_clear()


def test_delete_starts_the_cleanup_workflow(stack: Deployed) -> None:
    _registered_active(stack, "ml-cluster")
    cluster_stack(stack, "ml-cluster-vpc", {"ClusterName": "ml-cluster"})

    status, body = call(api_event("delete_cluster"))

    assert status == 202
    [execution] = executions(stack, "CleanupClusterStateMachine")
    workflow_input = json.loads(execution["input"])
    assert workflow_input["operationId"] == body["operationId"]
    assert workflow_input["budgetName"] == "hyperpod-ml-cluster"
    assert workflow_input["stackName"] == "ml-cluster-vpc"
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
    assert cluster["status"] == "DELETING"
    assert cluster["lastOperationId"] == body["operationId"]


def test_delete_while_creating_is_409(stack: Deployed) -> None:
    assert create()[0] == 202

    status, answer = call(api_event("delete_cluster"))

    assert status == 409
    assert "CREATING" in answer["message"]


def test_delete_of_an_unknown_cluster_is_404(stack: Deployed) -> None:
    status, _ = call(api_event("delete_cluster", path_parameters={"name": "nope"}, query=None))

    assert status == 404


def test_delete_adopts_a_cluster_autopilot_did_not_create(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {k: v for k, v in create_body("outside")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    # no creator on record: only the stack's admins may delete it
    as_admin(monkeypatch, "arn:aws:iam::123456789012:role/ResearcherRole")

    status, _body = call(api_event("delete_cluster", path_parameters={"name": "outside"}, query=None))

    assert status == 202
    workflow_input = json.loads(executions(stack, "CleanupClusterStateMachine")[0]["input"])
    assert workflow_input["stackName"] is None
    assert workflow_input["budgetName"] == "hyperpod-outside"
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "outside"}))
    assert cluster["status"] == "DELETING"


def test_delete_rejects_a_bad_stack_name(stack: Deployed) -> None:
    status, answer = call(api_event("delete_cluster", query={"stackName": "not a stack"}))

    assert status == 400
    assert problems(answer) == {("query", "stackName")}


# --- operations, validate, openapi, errors ----------------------------------------------------


def test_unknown_operation_is_404(stack: Deployed) -> None:
    status, answer = call(api_event("get_operation"))

    assert status == 404
    assert "op-20251121140000-0a1b2c3d" in answer["message"]


def test_validate_reports_without_creating(stack: Deployed) -> None:
    valid = create_body()
    invalid = create_body()
    invalid["clusterConfig"]["InstanceGroups"][0]["InstanceCount"] = -1

    status, good = call(api_event("validate", body={"clusterConfig": valid["clusterConfig"]}))
    _, bad = call(api_event("validate", body={"clusterConfig": invalid["clusterConfig"]}))

    assert status == 200
    assert good["valid"] is True
    assert bad["valid"] is False
    assert ("cluster-config.json", "InstanceGroups[0].InstanceCount") in problems(bad)
    assert executions(stack, "CreateClusterStateMachine") == []


def test_openapi_document_is_served_and_docs_are_current(stack: Deployed) -> None:
    status, document = call(api_event("openapi"))

    assert status == 200
    assert set(document["paths"]) == {
        "/clusters",
        "/clusters/{name}",
        "/clusters/{name}/nodes",
        "/clusters/{name}/cost",
        "/clusters/{name}/usage",
        "/clusters/{name}/account-budgets",
        "/clusters/{name}/growth-block",
        "/clusters/{name}/nodes/{nodeId}/reboot",
        "/clusters/{name}/nodes/{nodeId}/replace",
        "/clusters/{name}/operations",
        "/clusters/{name}/healing",
        "/clusters/{name}/instance-groups/{group}",
        "/operations/{operationId}",
        "/validate",
    }
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == document, "regenerate: .venv/bin/python -m autopilot.api.openapi docs/openapi.json"


def test_unknown_route_is_404_json(stack: Deployed) -> None:
    event = api_event("list_clusters", query=None)
    event["path"] = event["resource"] = "/nowhere"

    status, answer = call(event)

    assert status == 404
    assert answer == {"message": "no such resource: /nowhere"}


def test_unexpected_errors_are_500_json_without_details(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(read_clusters, "list_clusters", explode)

    status, answer = call(api_event("list_clusters", query=None))

    assert status == 500
    assert answer == {"message": "internal error"}


def test_lambda_handler_serves_the_api(stack: Deployed) -> None:
    spec = importlib.util.spec_from_file_location("api_app", Path(ROOT / "functions" / "api" / "app.py"))
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    response = module.lambda_handler(api_event("list_clusters", query=None), LambdaContext())

    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"clusters": [], "nextToken": None}


# --- bookkeeping that fails after the operation is recorded (issue 20, finding 8) ----------------


def fail_once(service: str, operation: str, *, table: str | None = None, lost: bool = False) -> list[str]:
    """The API's next ``operation`` call (on ``table``) fails as AWS may fail it after botocore's
    retries: answered 500 without taking effect, or with ``lost`` taking effect and its answer lost
    (a read timeout). Returns the calls it failed."""
    failed: list[str] = []

    def matches(request: dict[str, Any]) -> bool:
        if failed:
            return False
        return table is None or json.loads(request["body"] or b"{}").get("TableName") == table

    def refuse(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if not matches(params):
            return None
        failed.append(operation)
        error = {"Code": "InternalServerError", "Message": "Internal server error"}
        return AWSResponse(params["url"], 500, {}, None), {  # type: ignore[arg-type]
            "Error": error,
            "ResponseMetadata": {"HTTPStatusCode": 500},
        }

    def lose(http_response: AWSResponse, **_: Any) -> None:
        if not failed:
            failed.append(operation)
            raise ReadTimeoutError(endpoint_url=http_response.url)

    events = aws.client(service).meta.events
    if lost:
        events.register(
            f"after-call.{aws.client(service).meta.service_model.service_id.hyphenize()}.{operation}", lose
        )
    else:
        events.register(
            f"before-call.{aws.client(service).meta.service_model.service_id.hyphenize()}.{operation}", refuse
        )
    return failed


def test_a_create_whose_execution_arn_is_not_recorded_is_still_accepted(stack: Deployed) -> None:
    failed = fail_once("dynamodb", "UpdateItem", table=stack.stack.physical_id("StateTable"))

    status, answer = call(with_key(api_event("create_cluster", body=create_body()), "k"))

    assert failed == ["UpdateItem"]
    assert status == 202, answer
    [execution] = executions(stack, "CreateClusterStateMachine")
    assert execution["name"] == answer["operationId"]


def test_a_create_whose_answer_is_not_saved_is_accepted_and_its_retry_answered(stack: Deployed) -> None:
    failed = fail_once("dynamodb", "UpdateItem", table=stack.stack.physical_id("IdempotencyTable"))

    first = call(with_key(api_event("create_cluster", body=create_body()), "k"))
    # the key's record stays "in progress" (its answer was not saved): the retry finds the operation
    again = call(with_key(api_event("create_cluster", body=create_body()), "k"))

    assert failed == ["UpdateItem"]
    assert first[0] == again[0] == 202, (first, again)
    assert again[1]["operationId"] == first[1]["operationId"]
    assert len(executions(stack, "CreateClusterStateMachine")) == 1


def test_a_retry_after_a_lost_answer_gets_the_operation_the_first_attempt_started(stack: Deployed) -> None:
    failed = fail_once("stepfunctions", "StartExecution", lost=True)

    first = call(with_key(api_event("create_cluster", body=create_body()), "k"))
    again = call(with_key(api_event("create_cluster", body=create_body()), "k"))
    other = call(with_key(api_event("create_cluster", body=create_body(owner="bob")), "k"))
    no_key = create()

    assert failed == ["StartExecution"]
    assert first[0] == 503  # the first attempt cannot know: StartExecution's answer was lost
    assert again[0] == 202, again
    [execution] = executions(stack, "CreateClusterStateMachine")
    assert again[1]["operationId"] == execution["name"]
    assert other[0] == 422  # the same key for another request is still refused
    assert no_key[0] == 409  # and without a key the name is taken, as before


def test_a_retried_delete_after_a_lost_answer_gets_the_cleanup_the_first_attempt_started(
    stack: Deployed,
) -> None:
    _registered_active(stack, "ml-cluster")
    cluster_stack(stack, "ml-cluster-vpc", {"ClusterName": "ml-cluster"})
    failed = fail_once("stepfunctions", "StartExecution", lost=True)

    first = call(with_key(api_event("delete_cluster"), "del-1"))
    again = call(with_key(api_event("delete_cluster"), "del-1"))

    assert failed == ["StartExecution"]
    assert first[0] == 503
    assert again[0] == 202, again  # not 409 "ml-cluster is DELETING"
    [execution] = executions(stack, "CleanupClusterStateMachine")
    assert again[1]["operationId"] == execution["name"]
    assert call(api_event("delete_cluster"))[0] == 409  # without the key: the cleanup is running
