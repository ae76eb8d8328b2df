"""Deploying the real template.yaml into moto: its API stage, roles as SAM gives them, every resource."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sandbox.emulator.deploy import Throttle, load_template
from sandbox.harness.core import DEFAULT_TEMPLATE, Sandbox
from tests.sandbox.deploy_support import _role_documents


def test_real_api_stage_has_its_access_log_and_throttling(real: Sandbox) -> None:
    apigateway = real.client("apigateway")
    stage = apigateway.get_stage(restApiId=real.stack.apis["AutopilotApi"].api_id, stageName="dev")
    assert stage["accessLogSettings"]["destinationArn"] == real.stack.arn("ApiAccessLogGroup")
    assert json.loads(stage["accessLogSettings"]["format"])["requestId"] == "$context.requestId"
    throttling = stage["methodSettings"]["*/*"]
    assert (throttling["throttlingRateLimit"], throttling["throttlingBurstLimit"]) == (25.0, 50)
    # what the local API server throttles the stage with (one bucket for every method: "/*" "*")
    assert real.stack.apis["AutopilotApi"].throttling == {("/*", "*"): Throttle(25.0, 50)}
    assert apigateway.get_account()["cloudwatchRoleArn"] == real.stack.arn("ApiGatewayLogsRole")


# --- roles carry what SAM gives them ---------------------------------------------------------------
@pytest.fixture(scope="module")
def real() -> Iterator[Sandbox]:
    with Sandbox(DEFAULT_TEMPLATE, simulators=False, background=False, seed=1) as sandbox:
        yield sandbox


def test_api_function_role_names_each_idempotency_table_action(real: Sandbox) -> None:
    inline, managed = _role_documents(real, "ApiFunctionRole")
    table_arn = real.stack.arn("IdempotencyTable")
    idempotency = [s for document in inline for s in document["Statement"] if s.get("Resource") == table_arn]
    # exactly the calls Powertools' DynamoDB persistence layer makes (no SAM DynamoDBCrudPolicy)
    assert idempotency == [
        {
            "Sid": "IdempotencyRecords",
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            "Resource": table_arn,
        }
    ]
    sids = [s.get("Sid") for document in inline for s in document["Statement"]]
    assert {"StateTable", "StartWorkflows", "IdempotencyRecords"} <= set(sids)
    # a statement goes without a Sid only from a SAM policy template (EventBridgePutEventsPolicy)
    unnamed = [s for document in inline for s in document["Statement"] if "Sid" not in s]
    assert unnamed == [
        {
            "Effect": "Allow",
            "Action": "events:PutEvents",
            "Resource": f"arn:aws:events:{real.stack.region}:{real.stack.account_id}:event-bus/default",
        }
    ]
    # every function gets basic execution; Tracing: Active makes SAM attach the X-Ray policy
    assert {m["Arn"].rpartition("/")[2]: m["Statement"][0]["Action"][0] for m in managed} == {
        "AWSLambdaBasicExecutionRole": "logs:CreateLogGroup",
        "AWSXrayWriteOnlyAccess": "xray:PutTraceSegments",
    }
    function = real.client("lambda").get_function(FunctionName=real.stack.physical_id("ApiFunction"))
    assert function["Configuration"]["Role"] == real.stack.arn("ApiFunctionRole")


def test_state_machine_role_carries_its_statements_and_xray(real: Sandbox) -> None:
    inline, managed = _role_documents(real, "CreateClusterStateMachineRole")
    assert "iam:PassRole" in [s["Action"] for document in inline for s in document["Statement"]]
    assert [m["Arn"] for m in managed] == ["arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"]
    described = real.client("stepfunctions").describe_state_machine(
        stateMachineArn=real.stack.arn("CreateClusterStateMachine")
    )
    assert described["roleArn"] == real.stack.arn("CreateClusterStateMachineRole")


def test_real_template_deploys(real: Sandbox) -> None:
    template = load_template(DEFAULT_TEMPLATE)
    for logical_id in set(template["Resources"]) - set(real.stack.skipped):
        assert real.stack.resource(logical_id).logical_id.startswith(logical_id)  # a layer gets a hash suffix
    conditional = {name for name, output in template["Outputs"].items() if output.get("Condition")}
    assert set(template["Outputs"]) - conditional <= set(real.stack.outputs)
    table = real.client("dynamodb").describe_table(TableName=real.stack.physical_id("StateTable"))["Table"]
    assert table["TableStatus"] == "ACTIVE"
    routes = {(route.method, route.path) for route in real.stack.apis["AutopilotApi"].routes}
    assert {("POST", "/clusters"), ("DELETE", "/clusters/{name}")} <= routes
