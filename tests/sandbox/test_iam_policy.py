"""The IAM matcher (sandbox.emulator.aws_calls.policy) and how a call becomes IAM requests
(sandbox.emulator.aws_calls.iam)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.session
import pytest
from moto import mock_aws

from sandbox.emulator.aws_calls.iam import authorization_requests, iam_action
from sandbox.emulator.aws_calls.interception import Call, Principal
from sandbox.emulator.aws_calls.policy import Decision, Request, UnsupportedPolicy, evaluate, wildcard_match

ACCOUNT = "123456789012"
TABLE = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/state"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/fn-role"


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action: Any, resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def decide(document: dict[str, Any], action: str, resource: str = TABLE, **context: list[str]) -> Decision:
    return evaluate([document], Request(action, resource, context))


# --- actions and resources --------------------------------------------------------------------------
def test_actions_match_case_insensitively_with_wildcards() -> None:
    document = policy(allow(["dynamodb:Get*", "states:startexecution"]))
    assert decide(document, "dynamodb:GetItem") is Decision.ALLOWED
    assert decide(document, "states:StartExecution") is Decision.ALLOWED
    assert decide(document, "dynamodb:PutItem") is Decision.IMPLICIT_DENY


def test_resources_match_arn_wildcards_case_sensitively() -> None:
    document = policy(
        allow("dynamodb:GetItem", [f"{TABLE}/index/*", "arn:aws:dynamodb:us-east-?:*:table/stat?"])
    )
    assert decide(document, "dynamodb:GetItem", f"{TABLE}/index/by-owner") is Decision.ALLOWED
    assert decide(document, "dynamodb:GetItem", TABLE) is Decision.ALLOWED
    assert decide(document, "dynamodb:GetItem", TABLE.replace("state", "State")) is Decision.IMPLICIT_DENY
    assert decide(document, "dynamodb:GetItem", TABLE + "s") is Decision.IMPLICIT_DENY


def test_a_wildcard_never_reaches_across_an_arn_part() -> None:
    # IAM checks each of an ARN's six colon-separated parts on its own
    document = policy(allow("sagemaker:DescribeCluster", "arn:aws:sagemaker:*:cluster/*"))
    cluster = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abc123def456"
    assert decide(document, "sagemaker:DescribeCluster", cluster) is Decision.IMPLICIT_DENY
    document = policy(allow("sagemaker:DescribeCluster", "arn:aws:sagemaker:*:*:cluster/*"))
    assert decide(document, "sagemaker:DescribeCluster", cluster) is Decision.ALLOWED
    arn_like = policy(allow("iam:PassRole", Condition={"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*"}}))
    request = Request("iam:PassRole", ROLE, {"aws:PrincipalArn": [ROLE]})
    assert evaluate([arn_like], request) is Decision.IMPLICIT_DENY  # "*" stays in the resource part
    arn_like = policy(
        allow("iam:PassRole", Condition={"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:role/*"}})
    )
    assert evaluate([arn_like], request) is Decision.ALLOWED


def test_regex_characters_in_a_resource_are_literal() -> None:
    assert wildcard_match("arn:aws:s3:::a.b", "arn:aws:s3:::a.b")
    assert not wildcard_match("arn:aws:s3:::a.b", "arn:aws:s3:::aXb")


def test_an_explicit_deny_wins_over_any_allow() -> None:
    document = policy(
        allow("dynamodb:*"), {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}
    )
    assert decide(document, "dynamodb:DeleteItem") is Decision.EXPLICIT_DENY
    assert decide(document, "dynamodb:PutItem") is Decision.ALLOWED


def test_not_action_and_not_resource() -> None:
    document = policy(
        {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "dynamodb:*", "NotResource": TABLE},
    )
    assert decide(document, "dynamodb:GetItem") is Decision.ALLOWED
    assert decide(document, "iam:PassRole") is Decision.IMPLICIT_DENY
    assert decide(document, "dynamodb:GetItem", TABLE + "-other") is Decision.EXPLICIT_DENY


def test_no_policy_allows_nothing() -> None:
    assert evaluate([], Request("sts:AssumeRole", "*", {})) is Decision.IMPLICIT_DENY


# --- conditions ---------------------------------------------------------------------------------------
PASS_ROLE = policy(
    allow(
        "iam:PassRole",
        f"arn:aws:iam::{ACCOUNT}:role/*",
        Condition={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
    )
)


def test_string_equals_on_the_passed_to_service() -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/cluster"
    passed = {"iam:PassedToService": ["sagemaker.amazonaws.com"]}
    assert decide(PASS_ROLE, "iam:PassRole", role, **passed) is Decision.ALLOWED
    other = {"iam:PassedToService": ["ec2.amazonaws.com"]}
    assert decide(PASS_ROLE, "iam:PassRole", role, **other) is Decision.IMPLICIT_DENY
    assert decide(PASS_ROLE, "iam:PassRole", role) is Decision.IMPLICIT_DENY  # key absent: no match


def test_string_like_and_negated_operators_on_request_tags() -> None:
    document = policy(
        allow("sagemaker:CreateCluster", Condition={"StringLike": {"aws:RequestTag/project": "team-*"}}),
        {
            "Effect": "Deny",
            "Action": "sagemaker:CreateCluster",
            "Resource": "*",
            "Condition": {"StringNotEquals": {"aws:RequestTag/owner": "alice"}},
        },
    )
    tags = {"aws:RequestTag/project": ["team-a"], "aws:RequestTag/owner": ["alice"]}
    assert decide(document, "sagemaker:CreateCluster", "*", **tags) is Decision.ALLOWED
    # a missing key makes a negated operator match: the Deny applies
    no_owner = {"aws:RequestTag/project": ["team-a"]}
    assert decide(document, "sagemaker:CreateCluster", "*", **no_owner) is Decision.EXPLICIT_DENY


def test_if_exists_matches_a_missing_key() -> None:
    document = policy(
        allow("s3:GetObject", Condition={"StringEqualsIfExists": {"aws:RequestedRegion": "eu-west-1"}})
    )
    assert decide(document, "s3:GetObject", "*") is Decision.ALLOWED
    assert (
        decide(document, "s3:GetObject", "*", **{"aws:RequestedRegion": ["us-east-1"]})
        is Decision.IMPLICIT_DENY
    )


def test_null_tells_whether_a_modeled_key_is_present() -> None:
    document = policy(allow("sagemaker:CreateCluster", Condition={"Null": {"aws:RequestTag/owner": "false"}}))
    owner = {"aws:RequestTag/owner": ["alice"]}
    assert decide(document, "sagemaker:CreateCluster", "*", **owner) is Decision.ALLOWED
    assert decide(document, "sagemaker:CreateCluster", "*") is Decision.IMPLICIT_DENY


def test_resource_tags_where_the_request_carries_them() -> None:
    document = policy(
        allow("cloudformation:DeleteStack", Condition={"Null": {"aws:ResourceTag/ClusterName": "false"}})
    )
    tagged = Request("cloudformation:DeleteStack", "*", {}, {"ClusterName": "ml-1"})
    untagged = Request("cloudformation:DeleteStack", "*", {}, {})
    assert evaluate([document], tagged) is Decision.ALLOWED
    assert evaluate([document], untagged) is Decision.IMPLICIT_DENY
    with pytest.raises(UnsupportedPolicy):  # resource tags not looked up for this request
        evaluate([document], Request("cloudformation:DeleteStack", "*", {}))


@pytest.mark.parametrize(
    "condition",
    [
        {"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}},  # operator not evaluated
        {"StringEquals": {"aws:ResourceTag/owner": "alice"}},  # key not modeled
        {"ForAnyValue:StringEquals": {"aws:TagKeys": ["owner"]}},  # set operator
        {"Null": {"aws:ResourceTag/owner": "true"}},  # key not modeled: always absent here
    ],
)
def test_what_the_sandbox_cannot_evaluate_fails_loudly(condition: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedPolicy):
        decide(policy(allow("dynamodb:GetItem", Condition=condition)), "dynamodb:GetItem")


def test_policy_variables_fail_loudly() -> None:
    document = policy(allow("s3:GetObject", "arn:aws:s3:::bucket/${aws:username}/*"))
    with pytest.raises(UnsupportedPolicy):
        decide(document, "s3:GetObject", "arn:aws:s3:::bucket/alice/x")


# --- calls → IAM requests ----------------------------------------------------------------------------
def call(service: str, operation: str, **params: Any) -> Call:
    model = botocore.session.get_session().get_service_model(service)
    return Call(model, operation, params, "us-east-1", Principal(ROLE, "session"))


def requests_of(service: str, operation: str, **params: Any) -> list[tuple[str, str]]:
    return [(r.action, r.resource) for r in authorization_requests(call(service, operation, **params))]


@pytest.mark.parametrize(
    ("service", "operation", "action"),
    [
        ("stepfunctions", "StartExecution", "states:StartExecution"),
        ("lambda", "Invoke", "lambda:InvokeFunction"),
        ("budgets", "CreateBudget", "budgets:ModifyBudget"),
        ("budgets", "DescribeBudget", "budgets:ViewBudget"),
        ("resourcegroupstaggingapi", "GetResources", "tag:GetResources"),
        ("cloudwatch", "PutMetricData", "cloudwatch:PutMetricData"),
        ("events", "PutEvents", "events:PutEvents"),
    ],
)
def test_iam_action_names(service: str, operation: str, action: str) -> None:
    assert iam_action(call(service, operation)) == action


def test_resources_come_from_the_parameters() -> None:
    sm = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:create"
    assert requests_of("stepfunctions", "StartExecution", stateMachineArn=sm) == [
        ("states:StartExecution", sm)
    ]
    assert requests_of("dynamodb", "Query", TableName="state", IndexName="by-owner") == [
        ("dynamodb:Query", f"{TABLE}/index/by-owner")
    ]
    assert requests_of("events", "PutEvents", Entries=[{"Source": "x"}]) == [
        ("events:PutEvents", f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/default")
    ]
    assert requests_of("budgets", "DeleteBudget", AccountId=ACCOUNT, BudgetName="hyperpod-a") == [
        ("budgets:ModifyBudget", f"arn:aws:budgets::{ACCOUNT}:budget/hyperpod-a")
    ]
    assert requests_of("sagemaker", "DescribeCluster", ClusterName="Demo") == [
        ("sagemaker:DescribeCluster", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/demo")
    ]
    assert requests_of("resourcegroupstaggingapi", "GetResources") == [("tag:GetResources", "*")]
    assert requests_of("sts", "GetCallerIdentity") == []


def test_an_action_without_resource_types_is_authorized_on_star_only() -> None:
    """The Service Authorization Reference gives fsx:DescribeFileSystems no resource type: IAM
    authorizes it on "*" even when the call names file systems, so a statement scoped to
    file-system/* (CostTaggerFunction's, until issue 19) denies it, as on AWS."""
    file_system = f"arn:aws:fsx:us-east-1:{ACCOUNT}:file-system/fs-0123456789abcdef0"
    [describe] = authorization_requests(call("fsx", "DescribeFileSystems", FileSystemIds=[file_system[-20:]]))
    [tag] = authorization_requests(call("fsx", "TagResource", ResourceARN=file_system, Tags=[]))
    assert (describe.action, describe.resource) == ("fsx:DescribeFileSystems", "*")
    assert (tag.action, tag.resource) == ("fsx:TagResource", file_system)

    scoped = policy(allow(["fsx:DescribeFileSystems", "fsx:TagResource"], "arn:aws:fsx:*:*:file-system/*"))
    assert evaluate([scoped], describe) is Decision.IMPLICIT_DENY
    assert evaluate([scoped], tag) is Decision.ALLOWED
    assert evaluate([policy(allow("fsx:DescribeFileSystems"))], describe) is Decision.ALLOWED
    # an action the reference does not list keeps the resource the call names (documented)
    [moved] = authorization_requests(call("sagemaker", "MoveClusterNodes", ClusterName="demo"))
    assert moved.resource == f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/demo"


def test_session_calls_act_on_the_session_and_tag_reads_on_the_principal() -> None:
    assert requests_of("ssm", "TerminateSession", SessionId="alice-0a1b2c3d4e5f67890") == [
        ("ssm:TerminateSession", f"arn:aws:ssm:us-east-1:{ACCOUNT}:session/alice-0a1b2c3d4e5f67890")
    ]
    assert requests_of("ssm", "DescribeSessions", State="Active") == [("ssm:DescribeSessions", "*")]
    assert requests_of("iam", "ListUserTags", UserName="alice") == [
        ("iam:ListUserTags", f"arn:aws:iam::{ACCOUNT}:user/alice")
    ]
    assert requests_of("iam", "ListRoleTags", RoleName="Researcher") == [
        ("iam:ListRoleTags", f"arn:aws:iam::{ACCOUNT}:role/Researcher")
    ]


def test_a_transaction_is_authorized_item_by_item() -> None:
    items = [{"Put": {"TableName": "state"}}, {"ConditionCheck": {"TableName": "locks"}}]
    assert requests_of("dynamodb", "TransactWriteItems", TransactItems=items) == [
        ("dynamodb:ConditionCheckItem", TABLE.replace("state", "locks")),
        ("dynamodb:PutItem", TABLE),
    ]


def test_create_cluster_passes_its_execution_roles() -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/cluster"
    groups = [
        {"InstanceGroupName": "a", "ExecutionRole": role},
        {"InstanceGroupName": "b", "ExecutionRole": role},
    ]
    [create, pass_role] = authorization_requests(
        call("sagemaker", "CreateCluster", ClusterName="c", InstanceGroups=groups)
    )
    assert (create.action, pass_role.action, pass_role.resource) == (
        "sagemaker:CreateCluster",
        "iam:PassRole",
        role,
    )
    assert pass_role.context["iam:PassedToService"] == ["sagemaker.amazonaws.com"]
    assert evaluate([PASS_ROLE], pass_role) is Decision.ALLOWED


def test_a_stack_call_carries_the_stack_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        template = json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
        cloudformation.create_stack(
            StackName="cluster-ml-1", TemplateBody=template, Tags=[{"Key": "ClusterName", "Value": "ml-1"}]
        )
        [delete] = authorization_requests(call("cloudformation", "DeleteStack", StackName="cluster-ml-1"))
        [absent] = authorization_requests(call("cloudformation", "DeleteStack", StackName="absent"))
        [sns] = authorization_requests(call("sns", "Publish", TopicArn="arn:aws:sns:us-east-1:1:t"))
    assert delete.resource.startswith(f"arn:aws:cloudformation:us-east-1:{ACCOUNT}:stack/cluster-ml-1/")
    assert delete.resource_tags == {"ClusterName": "ml-1"}
    assert absent.resource_tags == {}
    assert sns.resource_tags is None  # not modeled: an aws:ResourceTag condition is refused
