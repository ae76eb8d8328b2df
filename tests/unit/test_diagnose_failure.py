"""DiagnoseFailureFunction's reads: HyperPod's lifecycle streams from CloudWatch Logs (moto), the
cluster's Error events (a botocore Stubber: moto has no ListClusterEvents), and what a missing log
group means."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from autopilot.logic.diagnose_failure import DiagnoseRequest, diagnose_failure, lifecycle_log_group
from botocore.stub import Stubber
from moto import mock_aws

ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdefgh1234"
# awslabs/awsome-distributed-ai issue #639
CONTROLLER_DOWN = "slurm_load_partitions: Unable to contact slurm controller (connect failure)"
LIFECYCLE_FAILED = (
    'Instance i-0b66516c4a8bfcea4 failed to provision with the following error: "Lifecycle scripts did not '
    'run successfully. …" Note that multiple instances may be impacted.'
)


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield boto3.client("logs", region_name="us-east-1")


def _sagemaker(events: list[dict[str, Any]] | None = None) -> Any:
    client = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(client)
    if events is not None:
        stubber.add_response(
            "list_cluster_events",
            {"Events": events},
            {"ClusterName": "ml-cluster", "SortBy": "EventTime", "SortOrder": "Ascending", "MaxResults": 100},
        )
    stubber.activate()
    return client


def _write(logs: Any, stream: str, lines: list[str], start_ms: int) -> None:
    group = lifecycle_log_group("ml-cluster", ARN)
    if not logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
        logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    if lines:
        events = [{"timestamp": start_ms + 1000 * i, "message": line} for i, line in enumerate(lines)]
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)


def _request(**changes: Any) -> DiagnoseRequest:
    return DiagnoseRequest.model_validate(
        {"clusterName": "ml-cluster", "clusterArn": ARN, "failureMessage": LIFECYCLE_FAILED, **changes}
    )


def test_the_log_group_is_named_for_the_cluster_and_its_id() -> None:
    assert lifecycle_log_group("ml-cluster", ARN) == "/aws/sagemaker/Clusters/ml-cluster/abcdefgh1234"


def test_no_log_group_is_the_finding_that_hyperpod_wrote_nothing(logs: Any) -> None:
    diagnosis = diagnose_failure(_request(), logs=logs, sagemaker=_sagemaker())

    assert diagnosis.category == "unknown"
    assert "i-0b66516c4a8bfcea4" in diagnosis.summary
    assert "logs:PutLogEvents" in diagnosis.fix


def test_the_controller_that_failed_first_is_the_cause_read_from_its_stream(logs: Any) -> None:
    now = int(time.time() * 1000)
    install = (
        "subprocess.CalledProcessError: Command '['sudo', 'bash', './utils/install_docker.sh']' returned "
        "non-zero exit status 100."
    )
    _write(
        logs,
        "LifecycleConfig/controller-machine/i-0aaaaaaaaaaaaaaaa",
        ["Execute script", install],
        now - 60_000,
    )
    for n in range(3):
        _write(logs, f"LifecycleConfig/worker-group/i-0{n:016x}", [CONTROLLER_DOWN], now)
    _write(logs, "Other/stream", ["Unable to contact slurm controller"], now - 120_000)

    diagnosis = diagnose_failure(_request(), logs=logs, sagemaker=_sagemaker())

    assert diagnosis.category == "package-install-failed"
    assert diagnosis.evidence[0].stream == "LifecycleConfig/controller-machine/i-0aaaaaaaaaaaaaaaa"


def test_a_continuous_clusters_error_events_are_read(logs: Any) -> None:
    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    capacity = (
        "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. "
        "Please try again."
    )
    event = {
        "EventId": "e-1",
        "ClusterArn": ARN,
        "ClusterName": "ml-cluster",
        "InstanceGroupName": "worker-group",
        "InstanceId": "i-0123456789abcdef0",
        "ResourceType": "Instance",
        "EventTime": at,
        "Description": capacity,
    }
    info = {**event, "EventId": "e-0", "EventLevel": "Info", "Description": "Insufficient capacity earlier"}
    sagemaker = _sagemaker([info, {**event, "EventLevel": "Error"}])

    diagnosis = diagnose_failure(_request(failureMessage="", continuous=True), logs=logs, sagemaker=sagemaker)

    assert diagnosis.category == "insufficient-capacity"
    assert [(e.stream, e.line) for e in diagnosis.evidence] == [
        ("ClusterEvent/i-0123456789abcdef0", capacity)
    ]


def test_given_only_the_clusters_name_its_id_comes_from_describe_cluster(logs: Any) -> None:
    now = int(time.time() * 1000)
    _write(logs, "LifecycleConfig/worker-group/i-0b66516c4a8bfcea4", [CONTROLLER_DOWN], now)
    _write(logs, "LifecycleConfig/worker-group/i-0ccccccccccccccc1", ["fatal error: (403) when calling"], now)
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(sagemaker)
    stubber.add_response("describe_cluster", _described(), {"ClusterName": "ml-cluster"})
    stubber.activate()
    request = DiagnoseRequest(cluster_name="ml-cluster", instance_ids=["i-0b66516c4a8bfcea4"])

    diagnosis = diagnose_failure(request, logs=logs, sagemaker=sagemaker)

    assert diagnosis.category == "controller-unreachable"
    stubber.assert_no_pending_responses()


def _described() -> dict[str, Any]:
    return {
        "ClusterArn": ARN,
        "ClusterName": "ml-cluster",
        "ClusterStatus": "InService",
        "InstanceGroups": [],
        "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]},
    }
