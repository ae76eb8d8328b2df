"""A role's permissions boundary limits what the sandbox's IAM allows it, as on AWS: only what both its
policies and the boundary allow (template parameter PermissionsBoundary; docs/deploy.md)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.session
from moto import mock_aws

from sandbox.emulator.aws_calls.iam import IamEnforcer
from sandbox.emulator.aws_calls.interception import Call, Principal

REGION = "us-east-1"


def _policy(*actions: str, effect: str = "Allow") -> str:
    return json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": effect, "Action": list(actions), "Resource": "*"}]}
    )


def _role(boundary: str | None) -> Principal:
    iam = boto3.client("iam", region_name=REGION)
    trust = _policy("sts:AssumeRole").replace(
        '"Resource": "*"', '"Principal": {"Service": "lambda.amazonaws.com"}'
    )
    extra: dict[str, Any] = {"PermissionsBoundary": boundary} if boundary else {}
    arn = iam.create_role(RoleName="worker", AssumeRolePolicyDocument=trust, **extra)["Role"]["Arn"]
    iam.put_role_policy(
        RoleName="worker", PolicyName="own", PolicyDocument=_policy("sqs:ListQueues", "sns:ListTopics")
    )
    return Principal(arn, "session")


def _answer(principal: Principal, service: str, operation: str) -> str:
    """The AccessDenied body the sandbox answers the call with ("" when IAM allows it)."""
    model = botocore.session.get_session().get_service_model(service)
    answer = IamEnforcer().check(Call(model, operation, {}, REGION, principal))
    return "" if answer is None else answer.body.decode()


def test_a_boundary_denies_what_only_the_roles_policy_allows() -> None:
    with mock_aws():
        boundary = boto3.client("iam").create_policy(
            PolicyName="boundary", PolicyDocument=_policy("sqs:ListQueues")
        )
        principal = _role(boundary["Policy"]["Arn"])
        assert _answer(principal, "sqs", "ListQueues") == ""
        denied = _answer(principal, "sns", "ListTopics")
        assert "because no permissions boundary allows the sns:ListTopics action" in denied


def test_an_explicit_deny_in_the_boundary_is_named() -> None:
    with mock_aws():
        iam = boto3.client("iam")
        document = json.loads(_policy("sqs:ListQueues", "sns:ListTopics"))
        document["Statement"].append(json.loads(_policy("sns:ListTopics", effect="Deny"))["Statement"][0])
        arn = iam.create_policy(PolicyName="boundary", PolicyDocument=json.dumps(document))["Policy"]["Arn"]
        denied = _answer(_role(arn), "sns", "ListTopics")
        assert "with an explicit deny in a permissions boundary" in denied


def test_without_a_boundary_the_roles_policy_decides() -> None:
    with mock_aws():
        assert _answer(_role(None), "sns", "ListTopics") == ""
