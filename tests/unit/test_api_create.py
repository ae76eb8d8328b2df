"""POST /clusters through the Powertools resolver, on the template deployed into moto (not executed): the
create, its dry run, Idempotency-Key replays, and bookkeeping that fails after the operation is recorded."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

import json
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.dal.state_table import StateTable
from autopilot.idempotency import IdempotencyKeyInProgressError, IdempotentRequest
from autopilot.models.bodies import OperationAccepted
from autopilot.models.records import OperationStatus
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import (
    USER_ARN,
    LambdaContext,
    call,
    cluster_stack,
    create,
    executions,
    problems,
    registered_active,
    stack,
    target_group,
    with_key,
)

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


def test_create_checks_and_stores_the_login_target_groups(stack: Deployed) -> None:
    ssh = target_group(stack, "autopilot-login-ssh")
    by_instance = target_group(stack, "autopilot-login-inst", target_type="instance")
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
    registered_active(stack, "ml-cluster")
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
    registered_active(stack, "ml-cluster")
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
