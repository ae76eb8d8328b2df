"""Shared fixtures for the sandbox tests. HyperPod simulator fixtures are prefixed ``hyperpod_``."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.server import ThreadedMotoServer

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator

TEST_REGION = "us-east-1"
HYPERPOD_REGION = TEST_REGION
HYPERPOD_ACCOUNT = "123456789012"

Drain = Callable[[], list[dict[str, Any]]]  # takes the captured messages' bodies off their queue


@pytest.fixture
def iam_keys_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake access keys for us-east-1 and no session token: callers sign as a plain IAM user."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": TEST_REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def sfn(iam_keys_env: None) -> Iterator[Any]:
    """moto's Step Functions, running the executions it starts (execute_state_machine): its client."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield boto3.client("stepfunctions")


@pytest.fixture
def hyperpod_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": HYPERPOD_REGION,
    }.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port, serving moto's in-process backends (and any simulator
    installed meanwhile) over HTTP: its URL. Its backends outlive ``mock_aws``."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def hyperpod_clock() -> SandboxClock:
    """A frozen clock: tests move it with ``advance``."""
    return SandboxClock(speed=0)


@pytest.fixture
def hyperpod_sim(hyperpod_aws_env: None, hyperpod_clock: SandboxClock) -> Iterator[HyperPodSimulator]:
    """An installed simulator for us-east-1 inside ``mock_aws``."""
    with (
        mock_aws(),
        HyperPodSimulator(
            hyperpod_clock, region=HYPERPOD_REGION, account_id=HYPERPOD_ACCOUNT, seed=7
        ) as simulator,
    ):
        yield simulator


@pytest.fixture
def hyperpod_sagemaker(hyperpod_sim: HyperPodSimulator) -> Any:
    """A plain boto3 SageMaker client (parameter validation on, no retries so throttling shows)."""
    return boto3.client(
        "sagemaker",
        region_name=HYPERPOD_REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


@pytest.fixture
def hyperpod_events(
    hyperpod_sim: HyperPodSimulator, capture_events: Callable[[str, dict[str, Any]], Drain]
) -> Drain:
    """Capture aws.sagemaker events through a real EventBridge rule into an SQS queue; call to drain."""
    return capture_events("hyperpod-events", {"source": ["aws.sagemaker"]})


@pytest.fixture
def capture_queue() -> Callable[[str], tuple[str, Drain]]:
    """Makes SQS queues (in the mocked us-east-1) to capture messages in: ``capture_queue(name)`` ->
    (queue ARN, drain)."""
    return _capture_queue


@pytest.fixture
def capture_events() -> Iterator[Callable[[str, dict[str, Any]], Drain]]:
    """Routes events through a real EventBridge rule into a new SQS queue:
    ``capture_events(rule_name, event_pattern)`` -> drain. moto delivers them, with the seam that
    keeps the event's ``account`` as EventBridge does."""
    with seams.installed(seams.keep_event_account):
        yield _capture_events


def _capture_queue(name: str) -> tuple[str, Drain]:
    sqs = boto3.client("sqs", region_name=TEST_REGION)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]

    def drain() -> list[dict[str, Any]]:
        received: list[dict[str, Any]] = []
        while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
            for message in messages:
                received.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        return received

    return queue_arn, drain


def _capture_events(rule_name: str, event_pattern: dict[str, Any]) -> Drain:
    queue_arn, drain = _capture_queue(f"{rule_name}-events")
    events = boto3.client("events", region_name=TEST_REGION)
    events.put_rule(Name=rule_name, EventPattern=json.dumps(event_pattern))
    events.put_targets(Rule=rule_name, Targets=[{"Id": "queue", "Arn": queue_arn}])
    return drain


@pytest.fixture
def hyperpod_cluster_request() -> Callable[..., dict[str, Any]]:
    """Builds CreateCluster requests: ``hyperpod_cluster_request(name, workers=2, **overrides)``."""
    return build_hyperpod_cluster_request


def build_hyperpod_cluster_request(
    name: str = "ml-cluster", workers: int = 2, **overrides: Any
) -> dict[str, Any]:
    """A workshop-shaped CreateCluster request: a Slurm controller group and a GPU worker group."""
    lifecycle = {"SourceS3Uri": "s3://sagemaker-lifecycle-bucket/src", "OnCreate": "on_create.sh"}
    role = f"arn:aws:iam::{HYPERPOD_ACCOUNT}:role/HyperPodExecutionRole"
    request: dict[str, Any] = {
        "ClusterName": name,
        "InstanceGroups": [
            {
                "InstanceGroupName": "controller-machine",
                "InstanceType": "ml.m5.12xlarge",
                "InstanceCount": 1,
                "LifeCycleConfig": lifecycle,
                "ExecutionRole": role,
                "ThreadsPerCore": 2,
                "SlurmConfig": {"NodeType": "Controller"},
            },
            {
                "InstanceGroupName": "worker-group-1",
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": workers,
                "LifeCycleConfig": lifecycle,
                "ExecutionRole": role,
                "ThreadsPerCore": 1,
                "SlurmConfig": {"NodeType": "Compute", "PartitionNames": ["dev"]},
            },
        ],
        "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
        "Tags": [{"Key": "owner", "Value": "alice"}, {"Key": "project", "Value": "llm"}],
        "NodeRecovery": "None",
    }
    request.update(overrides)
    return request


def create_states_role(sandbox: Any, name: str, actions: list[str]) -> None:
    """An IAM role Step Functions may assume in ``sandbox``, allowed ``actions`` on every resource."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    iam = sandbox.client("iam")
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    allowed = {"Effect": "Allow", "Action": actions, "Resource": "*"}
    iam.put_role_policy(
        RoleName=name,
        PolicyName="tasks",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [allowed]}),
    )


@pytest.fixture(scope="session")
def slurm_required() -> None:
    """Real Slurm (``make slurm``): a test that needs it skips where it is not installed, with one line
    saying how to install it; under CI (env ``CI`` set) it fails instead: CI never skips them."""
    from sandbox.services.slurm import INSTALL_HINT, missing_slurm  # noqa: PLC0415

    missing = missing_slurm()
    if missing:
        message = f"real Slurm is not installed ({', '.join(missing)} missing): {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
