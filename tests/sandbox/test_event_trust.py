"""Nobody but AWS and the workflows can put a HyperPod event or a Budgets notification in front of
Autopilot (issue 20): the template's queue and topic policies as the sandbox evaluates them, and
EventBridge's refusal of a caller's ``aws.*`` source."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest
from moto import mock_aws

from sandbox.emulator import seams
from sandbox.emulator.aws_calls import resource_policy
from sandbox.emulator.aws_calls.iam import IamEnforcer
from sandbox.emulator.aws_calls.interception import Call, Principal
from sandbox.emulator.aws_calls.policy import Decision
from sandbox.harness.stack import ACCOUNT, REGION, Deployed, deployed


@pytest.fixture(scope="module")
def stack() -> Iterator[Deployed]:
    with deployed(execute=False) as deployed_stack:
        yield deployed_stack


def _mallory() -> Principal:
    """A principal of the account whose own policy allows sending to any queue and topic."""
    iam = boto3.client("iam", region_name=REGION)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "sts:AssumeRole"}],
    }
    try:
        arn = iam.create_role(RoleName="mallory", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    except iam.exceptions.EntityAlreadyExistsException:
        arn = iam.get_role(RoleName="mallory")["Role"]["Arn"]
    allow = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["sqs:SendMessage", "sns:Publish"], "Resource": "*"}],
    }
    iam.put_role_policy(RoleName="mallory", PolicyName="send", PolicyDocument=json.dumps(allow))
    return Principal(arn, "mallory")


def _answer(principal: Principal, service: str, operation: str, params: dict[str, Any]) -> str:
    """The AccessDenied body the sandbox answers the call with ("" when it is allowed)."""
    model = botocore.session.get_session().get_service_model(service)
    answer = IamEnforcer().check(Call(model, operation, params, REGION, principal))
    return "" if answer is None else answer.body.decode()


def _role_arn(stack: Deployed, logical_id: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{stack.stack.physical_id(logical_id)}"


def test_a_forged_event_sent_straight_to_the_cluster_events_queue_is_refused(stack: Deployed) -> None:
    url = stack.stack.physical_id("ClusterEventsQueue")
    forged = {"QueueUrl": url, "MessageBody": json.dumps({"detail-type": "forged"})}

    denied = _answer(_mallory(), "sqs", "SendMessage", forged)
    assert "with an explicit deny in a resource-based policy" in denied
    assert "sqs:SendMessage" in denied
    batch = {"QueueUrl": url, "Entries": [{"Id": "1", "MessageBody": "{}"}]}
    assert "explicit deny" in _answer(_mallory(), "sqs", "SendMessageBatch", batch)

    # the workflows' wait requests still pass (their roles are named in the policy)
    workflow = Principal(_role_arn(stack, "CreateClusterStateMachineRole"), "execution")
    assert _answer(workflow, "sqs", "SendMessage", forged) == ""


def test_only_the_hyperpod_rule_may_deliver_to_the_queue(stack: Deployed) -> None:
    queue = stack.stack.arn("ClusterEventsQueue")
    rule = stack.stack.arn("HyperPodEventsRule")
    other = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/mallorys-rule"

    def decision(source_arn: str) -> Decision:
        return resource_policy.delivery_decision(
            queue, "sqs:SendMessage", service="events.amazonaws.com", source_arn=source_arn
        )

    assert decision(rule) is Decision.ALLOWED
    assert decision(other) is Decision.EXPLICIT_DENY


def test_a_forged_budgets_notification_published_to_the_topic_is_refused(stack: Deployed) -> None:
    publish = {"TopicArn": stack.stack.arn("BudgetNotificationsTopic"), "Message": "AWS Budget Notification"}

    assert "with an explicit deny in a resource-based policy" in _answer(
        _mallory(), "sns", "Publish", publish
    )
    # AWS Budgets itself, on this account's behalf, still may
    decision = resource_policy.delivery_decision(
        publish["TopicArn"],
        "sns:Publish",
        service="budgets.amazonaws.com",
        source_arn=f"arn:aws:budgets::{ACCOUNT}:budget/hyperpod-cluster-a",
    )
    assert decision is Decision.ALLOWED


def test_the_hyperpod_rule_matches_this_accounts_events_only(stack: Deployed) -> None:
    events = boto3.client("events", region_name=REGION)
    rule = events.describe_rule(Name=stack.stack.physical_id("HyperPodEventsRule"))
    assert json.loads(rule["EventPattern"])["account"] == [ACCOUNT]


def test_put_events_with_an_aws_source_is_refused_per_entry() -> None:
    with mock_aws(), seams.installed(seams.refuse_aws_event_sources):
        events = boto3.client("events", region_name=REGION)
        answer = events.put_events(
            Entries=[
                {
                    "Source": "aws.sagemaker",
                    "DetailType": "SageMaker HyperPod Cluster State Change",
                    "Detail": "{}",
                },
                {"Source": "autopilot.test", "DetailType": "x", "Detail": "{}"},
            ]
        )
    assert answer["FailedEntryCount"] == 1
    refused, accepted = answer["Entries"]
    assert refused["ErrorCode"] == "NotAuthorizedForSourceException"
    assert "EventId" not in refused
    assert "EventId" in accepted
    assert "ErrorCode" not in accepted


def test_without_the_seam_moto_accepts_an_aws_source() -> None:
    """What the seam changes (moto puts any source)."""
    with mock_aws():
        events = boto3.client("events", region_name=REGION)
        answer = events.put_events(Entries=[{"Source": "aws.sagemaker", "DetailType": "x", "Detail": "{}"}])
    assert answer["FailedEntryCount"] == 0
