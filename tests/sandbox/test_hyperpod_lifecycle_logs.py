"""The HyperPod simulator writes each launched instance's lifecycle-script log to CloudWatch Logs
(moto), and its lifecycle_failure fault replays a log excerpt as a failed create: the lines end the
instance's stream, the cluster is Failed with SageMaker's usual FailureMessage (or the one given)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from autopilot.diagnosis.catalog import catalog
from autopilot.diagnosis.matcher import LogLine, LogStream, diagnose

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.hyperpod.lifecycle_logs import (
    HEALTHY_LINES,
    LIFECYCLE_FAILED_MESSAGE,
    STARTED_LINES,
    category_lines,
)

MINUTE = 60.0
Request = Callable[..., dict[str, Any]]
# awslabs/awsome-distributed-ai issue #639
CONTROLLER_DOWN = "slurm_load_partitions: Unable to contact slurm controller (connect failure)"


def _streams(arn: str, name: str = "ml-cluster") -> dict[str, list[str]]:
    logs = boto3.client("logs", region_name="us-east-1")
    group = f"/aws/sagemaker/Clusters/{name}/{arn.rsplit('/', 1)[-1]}"
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    return {
        s["logStreamName"]: [
            e["message"]
            for e in logs.get_log_events(logGroupName=group, logStreamName=s["logStreamName"])["events"]
        ]
        for s in streams
    }


def test_every_launched_instance_gets_its_lifecycle_stream(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]

    streams = _streams(arn)

    assert set(streams) == {f"LifecycleConfig/{n['InstanceGroupName']}/{n['InstanceId']}" for n in nodes}
    assert all(lines == list(HEALTHY_LINES) for lines in streams.values())


def test_a_lifecycle_failure_ends_the_instances_stream_with_the_lines_and_fails_the_create(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sim.apply_fault(
        "lifecycle_failure", {"cluster": "ml-cluster", "group": "worker-group-1", "lines": [CONTROLLER_DOWN]}
    )
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)

    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    streams = _streams(arn)

    assert described["ClusterStatus"] == "Failed"
    [failed] = [name for name, lines in streams.items() if lines[-1] == CONTROLLER_DOWN]
    assert failed.startswith("LifecycleConfig/worker-group-1/i-")
    instance = failed.rsplit("/", 1)[-1]
    assert described["FailureMessage"].startswith(f"Instance {instance} failed to provision")
    assert "Lifecycle scripts did not run successfully" in described["FailureMessage"]
    assert len(streams) == 3  # the other instances ran their scripts too
    # one create only: the next one of the same name comes up
    hyperpod_sagemaker.delete_cluster(ClusterName=arn)
    hyperpod_clock.advance(20 * MINUTE)
    again = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)
    assert hyperpod_sagemaker.describe_cluster(ClusterName=again)["ClusterStatus"] == "InService"


def test_a_canned_category_and_a_failure_message_of_ones_own(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sim.apply_fault(
        "lifecycle_failure", {"category": "crlf-line-endings", "failure_message": "boom"}
    )
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=1))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)

    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["FailureMessage"] == "boom"
    assert any(lines[-1] == category_lines("crlf-line-endings")[0] for lines in _streams(arn).values())


@pytest.mark.parametrize(
    "params",
    [{}, {"lines": []}, {"category": "no-such-cause"}, {"lines": ["x"], "category": "crlf-line-endings"}],
)
def test_a_lifecycle_failure_without_lines_is_refused(hyperpod_sim: HyperPodSimulator, params: Any) -> None:
    with pytest.raises(ValueError, match=r"lines|category"):
        hyperpod_sim.apply_fault("lifecycle_failure", params)


@pytest.mark.parametrize("category", [entry.category for entry in catalog()])
def test_each_canned_fault_replays_as_its_own_category(category: str) -> None:
    stream = LogStream(
        "LifecycleConfig/worker-group-1/i-0b66516c4a8bfcea4",
        tuple(LogLine(n, line) for n, line in enumerate([*STARTED_LINES, *category_lines(category)])),
    )

    assert (
        diagnose(
            [stream], failure_message=LIFECYCLE_FAILED_MESSAGE.format(instance_id="i-0b66516c4a8bfcea4")
        ).category
        == category
    )


def test_a_replacement_that_fails_its_scripts_stays_in_failure_with_its_stream(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)
    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"
    hyperpod_sim.apply_fault("lifecycle_failure", {"group": "worker-group-1", "lines": [CONTROLLER_DOWN]})
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn, InstanceGroupNameContains="worker")
    node = nodes["ClusterNodeSummaries"][0]["InstanceId"]

    hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName=arn, NodeIds=[node])
    hyperpod_clock.advance(60 * MINUTE)

    [successor] = [
        n
        for n in hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "worker-group-1" and n["InstanceStatus"]["Status"] == "Failure"
    ]
    status = hyperpod_sagemaker.describe_cluster_node(ClusterName=arn, NodeId=successor["InstanceId"])
    assert "Lifecycle scripts did not run successfully" in status["NodeDetails"]["InstanceStatus"]["Message"]
    assert _streams(arn)[f"LifecycleConfig/worker-group-1/{successor['InstanceId']}"][-1] == CONTROLLER_DOWN
    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"
