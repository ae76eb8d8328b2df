"""ApiFunction on the template deployed into moto (workflows not executed): the `stack` fixture and the
helpers the API's unit tests share (calling a route, a create, an Idempotency-Key, an ACTIVE cluster)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.settings import api_settings

from sandbox.harness.stack import Deployed, deployed
from tests.samples import api_event, create_body

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


def registered_active(stack: Deployed, name: str) -> str:
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


def target_group(stack: Deployed, name: str, target_type: str = "ip") -> str:
    ec2 = stack.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(
        stack.client("elbv2").create_target_group(
            Name=name, Protocol="TCP", Port=22, VpcId=vpc, TargetType=target_type
        )["TargetGroups"][0]["TargetGroupArn"]
    )
