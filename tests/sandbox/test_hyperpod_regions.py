"""Every region has its HyperPod: a plain boto3 client in us-west-2 against a sandbox in us-east-1.

The HyperPod workshops use us-west-2; the sandbox's home region is us-east-1. The client must meet
the same simulated HyperPod there, in process and over the sandbox's AWS endpoint (HTTP), never
moto's own SageMaker, with the events on us-west-2's default bus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sandbox.emulator.bus import let_rule_send_to_queue
from sandbox.harness.core import Sandbox
from sandbox.services.hyperpod import STATE_CHANGE, HyperPodTimings

REGION = "us-west-2"
CREATE = 20 * 60 + HyperPodTimings().event_delivery  # created, and its event delivered
Request = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(speed=0, background=False, schedules=False, seed=5) as running:
        yield running


@pytest.fixture(scope="module")
def aws_url(sandbox: Sandbox) -> str:
    return sandbox.serve_aws(0)


@pytest.fixture(params=["in-process", "http"])
def west(request: pytest.FixtureRequest, sandbox: Sandbox, aws_url: str) -> Any:
    """A plain SageMaker client in us-west-2: through mock_aws, or over the sandbox's AWS endpoint."""
    return boto3.client(
        "sagemaker",
        region_name=REGION,
        endpoint_url=aws_url if request.param == "http" else None,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


@pytest.fixture
def west_events(sandbox: Sandbox, request: pytest.FixtureRequest) -> Callable[[], list[dict[str, Any]]]:
    """aws.sagemaker events of us-west-2's default bus, through a rule into an SQS queue there."""
    name = re.sub(r"[^a-zA-Z0-9-]", "-", request.node.name)[:60]
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = boto3.client("events", region_name=REGION)
    rule_arn = events.put_rule(Name=name, EventPattern=json.dumps({"source": ["aws.sagemaker"]}))["RuleArn"]
    let_rule_send_to_queue(sqs, queue_url, queue_arn, rule_arn)
    events.put_targets(Rule=name, Targets=[{"Id": "queue", "Arn": queue_arn}])

    def drain() -> list[dict[str, Any]]:
        received = []
        while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
            for message in messages:
                received.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        return received

    return drain


def test_a_us_west_2_client_meets_the_simulated_hyperpod(
    sandbox: Sandbox,
    west: Any,
    west_events: Callable[[], list[dict[str, Any]]],
    hyperpod_cluster_request: Request,
    request: pytest.FixtureRequest,
) -> None:
    name = f"west-{request.node.callspec.id}"
    arn = west.create_cluster(**hyperpod_cluster_request(name, workers=2))["ClusterArn"]

    assert re.fullmatch(rf"arn:aws:sagemaker:{REGION}:{sandbox.account_id}:cluster/[a-z0-9]{{12}}", arn)
    assert west.describe_cluster(ClusterName=name)["ClusterStatus"] == "Creating"
    sandbox.advance(CREATE)
    assert west.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"

    pages = list(
        west.get_paginator("list_cluster_nodes").paginate(ClusterName=name, PaginationConfig={"PageSize": 1})
    )
    nodes = [n for page in pages for n in page["ClusterNodeSummaries"]]
    assert len(pages) == 3
    assert len({n["InstanceId"] for n in nodes}) == 3
    worker = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "worker-group-1")
    assert west.batch_reboot_cluster_nodes(ClusterName=name, NodeIds=[worker])["Successful"] == [worker]
    with pytest.raises(ClientError) as error:
        west.describe_cluster(ClusterName="no-such-cluster")
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"

    changes = [e for e in west_events() if e["detail-type"] == STATE_CHANGE and e["resources"] == [arn]]
    assert [(e["region"], e["detail"]["ClusterStatus"]) for e in changes] == [
        (REGION, "Creating"),
        (REGION, "InService"),
    ]
    # the cluster lives in us-west-2's simulator only
    assert sandbox.hyperpod_for(REGION).owns_arn(arn)
    assert not sandbox.hyperpod.owns_arn(arn)
    assert {s.region for s in sandbox.hyperpods()} >= {sandbox.region, REGION}


def test_tags_of_an_unknown_cluster_are_a_client_error(west: Any) -> None:
    arn = f"arn:aws:sagemaker:{REGION}:123456789012:cluster/abcdefghij12"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("add_tags", {"Tags": [{"Key": "k", "Value": "v"}]}),
        ("list_tags", {}),
        ("delete_tags", {"TagKeys": ["k"]}),
    ]
    for method, params in calls:
        with pytest.raises(ClientError) as error:
            getattr(west, method)(ResourceArn=arn, **params)
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert error.value.response["Error"]["Code"] == "ValidationException"
