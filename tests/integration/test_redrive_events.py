"""Dead-lettered cluster events go back to their queue after a delay (issue 20, finding 9): the sweep's
redrive (logic/redrive_events.py) on the template deployed into moto, with the sandbox's SQS redrive
(sandbox/emulator/sqs), its calls authorized against HealingSweepFunction's role, and the dead-letter queue
closed to anyone who would launder a forged event through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pytest
from autopilot.logic.redrive_events import REDRIVE_EVERY, redrive_dead_letters
from autopilot.settings import HealingSweepSettings
from moto.sqs.models import sqs_backends

from sandbox.emulator.aws_calls.iam import IamEnforcer
from sandbox.emulator.aws_calls.interception import Call, Principal
from sandbox.emulator.sqs import MessageMoves
from sandbox.harness.stack import ACCOUNT, REGION, Deployed, deployed
from tests.samples import load_event

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with deployed(execute=False) as d:
        moves = MessageMoves(lambda: NOW)
        moves.install()
        try:
            yield d
        finally:
            moves.uninstall()


def settings(stack: Deployed) -> HealingSweepSettings:
    return HealingSweepSettings.from_environ(stack.environment("HealingSweepFunction"))


def dead_letter(stack: Deployed, body: str) -> None:
    """A message in the dead-letter queue, put there as SQS itself moves one (no principal's send)."""
    name = stack.stack.physical_id("ClusterEventsDeadLetterQueue").rsplit("/", 1)[-1]
    sqs_backends[ACCOUNT][REGION].send_message(name, body)


def bodies(stack: Deployed, logical_id: str) -> list[str]:
    url = stack.stack.physical_id(logical_id)
    received = stack.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [m["Body"] for m in received.get("Messages", [])]


def redrive(stack: Deployed, now: datetime) -> str:
    sweep = settings(stack)
    return redrive_dead_letters(
        stack.client("sqs"),
        dead_letter_arn=sweep.cluster_events_dead_letter_queue_arn,
        queue_arn=sweep.cluster_events_queue_arn,
        now=now,
    )


def test_dead_letters_go_back_to_the_queue_at_most_every_redrive_interval(stack: Deployed) -> None:
    event = json.dumps(load_event("hyperpod/cluster_node_health_event.json"))
    dead_letter(stack, event)

    assert redrive(stack, NOW) == "started"
    assert bodies(stack, "ClusterEventsQueue") == [event]
    assert bodies(stack, "ClusterEventsDeadLetterQueue") == []

    # one that fails again waits for the next redrive, not the next sweep
    dead_letter(stack, event)
    assert redrive(stack, NOW + REDRIVE_EVERY - timedelta(minutes=1)) == "waiting"
    assert bodies(stack, "ClusterEventsDeadLetterQueue") == [event]
    assert redrive(stack, NOW + REDRIVE_EVERY) == "started"
    assert bodies(stack, "ClusterEventsDeadLetterQueue") == []


def _answer(principal: Principal, operation: str, params: dict[str, Any]) -> str:
    """The AccessDenied body the sandbox answers the SQS call with ("" when it is allowed)."""
    model = botocore.session.get_session().get_service_model("sqs")
    answer = IamEnforcer().check(Call(model, operation, params, REGION, principal))
    return "" if answer is None else answer.body.decode()


def test_the_sweeps_role_may_redrive_and_nobody_may_forge_a_dead_letter(stack: Deployed) -> None:
    sweep = settings(stack)
    role = f"arn:aws:iam::{ACCOUNT}:role/{stack.stack.physical_id('HealingSweepFunctionRole')}"
    function = Principal(role, "HealingSweepFunction")
    start = {
        "SourceArn": sweep.cluster_events_dead_letter_queue_arn,
        "DestinationArn": sweep.cluster_events_queue_arn,
    }

    assert _answer(function, "StartMessageMoveTask", start) == ""
    assert _answer(function, "ListMessageMoveTasks", {"SourceArn": start["SourceArn"]}) == ""
    # the redrive sends on as the caller: the queue's Deny names the sweep's role beside the workflows'
    queue = stack.stack.physical_id("ClusterEventsQueue")
    assert _answer(function, "SendMessage", {"QueueUrl": queue, "MessageBody": "{}"}) == ""

    iam = boto3.client("iam", region_name=REGION)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "sts:AssumeRole"}],
    }
    mallory = iam.create_role(RoleName="mallory", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]}
    iam.put_role_policy(RoleName="mallory", PolicyName="sqs", PolicyDocument=json.dumps(allow))
    dlq = stack.stack.physical_id("ClusterEventsDeadLetterQueue")
    forged = _answer(Principal(mallory, "mallory"), "SendMessage", {"QueueUrl": dlq, "MessageBody": "{}"})
    assert "with an explicit deny in a resource-based policy" in forged
