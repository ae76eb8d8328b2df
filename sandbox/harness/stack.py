"""template.yaml deployed into moto (sandbox.emulator.deploy) with the HyperPod simulator: what tests run
against."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from sandbox.emulator import seams
from sandbox.emulator.aws_calls import AwsCalls
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.deploy import Stack, deploy
from sandbox.harness.moto_snapshot import AccountSnapshot
from sandbox.services.hyperpod import HyperPodSimulator

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
REGION = "us-east-1"
ACCOUNT = "123456789012"
CAPTURE_QUEUE = "captured-operation-events"
# What a test's stack is deployed with unless it says otherwise. The sample requests (events/api/) name
# a lifecycle bucket, subnets and a security group that exist in no account, and callers IAM does not
# know: CallerResourceChecks would refuse every create, so the tests of it enable it themselves
# (tests/sandbox/test_no_confused_deputy.py). The workflow tests create EKS-orchestrated clusters.
TEST_PARAMETERS: Mapping[str, Any] = {"CallerResourceChecks": "Disabled", "EksClusterNames": "*"}


@dataclass
class Deployed:
    stack: Stack
    hyperpod: HyperPodSimulator
    clock: SandboxClock
    aws_calls: AwsCalls | None = None  # IAM + faults on the workflows' calls, when a test installs them
    # execution threads of earlier stacks still waiting on a timer or token when this one was made
    blocked_before: int = 0

    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """One client per service for the stack's life (a new one costs 13-42 ms; tests poll)."""
        if service not in self._clients:
            self._clients[service] = boto3.client(service, region_name=REGION)  # type: ignore[call-overload]
        return self._clients[service]

    def environment(self, function: str = "ApiFunction") -> dict[str, str]:
        """The function's environment as Lambda sets it: the template's variables and AWS_REGION."""
        return {**self.stack.function(function).environment, "AWS_REGION": self.stack.region}

    def operation_events(self) -> list[dict[str, Any]]:
        """Autopilot events the OperationEventsRule matched so far (captured on an SQS queue)."""
        sqs = self.client("sqs")
        url = sqs.get_queue_url(QueueName=CAPTURE_QUEUE)["QueueUrl"]
        events: list[dict[str, Any]] = []
        while True:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return events
            events += [json.loads(m["Body"]) for m in messages]


def _capture_operation_events(stack: Stack) -> None:
    """Point the operation-event rules at an SQS queue the test reads (moto cannot deliver to SNS;
    the sandbox's seam does, and the e2e tests cover that leg)."""
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=CAPTURE_QUEUE)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for logical_id in ("OperationEventsRule", "FailedOperationsRule"):
        rule = stack.physical_id(logical_id)
        targets = events.list_targets_by_rule(Rule=rule)["Targets"]
        events.remove_targets(Rule=rule, Ids=[t["Id"] for t in targets])
    events.put_targets(
        Rule=stack.physical_id("OperationEventsRule"), Targets=[{"Id": "capture", "Arn": queue_arn}]
    )
    # moto invokes a queue's function itself when a message is sent and, without Docker, takes the
    # batch as processed: the tests hand the queues to the functions' logic themselves.
    awslambda = boto3.client("lambda", region_name=REGION)
    for mapping in awslambda.list_event_source_mappings()["EventSourceMappings"]:
        awslambda.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    # moto cannot deliver to Lambda targets, and matches every event against a rule without a pattern (a
    # schedule): without this the first HyperPod event, or the API's Healing Resumed (HealingSweepFunction's
    # rule), fails. Nothing runs functions here anyway.
    for listed in events.list_rules()["Rules"]:
        targets = events.list_targets_by_rule(Rule=listed["Name"])["Targets"]
        functions = [t["Id"] for t in targets if t["Arn"].split(":")[2] == "lambda"]
        if functions:
            events.remove_targets(Rule=listed["Name"], Ids=functions)


# (execute, parameters) -> the account as that deploy left it, with its Stack
_deployments: dict[str, AccountSnapshot] = {}


@contextmanager
def deployed(
    *, execute: bool, parameters: Mapping[str, Any] | None = None, clock_speed: float = 0.0
) -> Iterator[Deployed]:
    """The stack in moto; ``execute`` runs Step Functions executions for real (moto's ASL executor),
    which names aws-sdk errors as AWS does (the one sandbox seam these tests need).

    The template is deployed once per process and set of arguments: later calls start from a copy of
    what that deploy left in moto (sandbox/harness/moto_snapshot.py), each test with its own.
    Physical names come from a fixed seed, so every deploy writes the same ASL text and moto's ANTLR
    validation of it at CreateStateMachine is served from the parse-tree cache after the first."""
    with (
        # no Docker: Lambda invocations reach moto's simple backend (the runtime a test installs)
        mock_aws(
            config={"stepfunctions": {"execute_state_machine": execute}, "lambda": {"use_docker": False}}
        ),
        seams.installed(seams.name_aws_sdk_errors, seams.cache_stepfunctions_parse_trees),
    ):
        parameters = {**TEST_PARAMETERS, **(parameters or {})}
        key = json.dumps([execute, parameters], sort_keys=True, default=str)
        snapshot = _deployments.get(key)
        if snapshot is None:
            stack = deploy(TEMPLATE, region=REGION, account_id=ACCOUNT, parameters=parameters, seed=7)
            _capture_operation_events(stack)
            _deployments[key] = AccountSnapshot.take(ACCOUNT, extra=stack)
        else:
            stack = snapshot.restore()
        clock = SandboxClock(speed=clock_speed)
        hyperpod = HyperPodSimulator(clock, region=REGION, account_id=ACCOUNT, seed=7)
        hyperpod.install()
        try:
            yield Deployed(stack, hyperpod, clock)
        finally:
            hyperpod.uninstall()
