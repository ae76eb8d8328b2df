"""MoveClusterNodes (botocore 1.44.8): a node goes DetachInProgress in its group, then AttachInProgress in
the target group with the same instance id, then Running; billed throughout; refused unless both clusters
are InService EKS clusters in Continuous mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator

Request = Callable[..., dict[str, Any]]
EKS = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}}
MINUTE = 60.0


def _eks_continuous(request: Request, name: str) -> dict[str, Any]:
    built = request(name, Orchestrator=EKS, NodeProvisioningMode="Continuous")
    for group in built["InstanceGroups"]:
        group.pop("SlurmConfig")
    built["InstanceGroups"][0]["InstanceType"] = "ml.p5.48xlarge"  # a second group of the workers' type
    return built


def _status(sagemaker: Any, cluster: str, node: str) -> tuple[str, str]:
    details = sagemaker.describe_cluster_node(ClusterName=cluster, NodeId=node)["NodeDetails"]
    return details["InstanceGroupName"], details["InstanceStatus"]["Status"]


def test_a_node_moves_to_the_other_group_keeping_its_instance(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**_eks_continuous(hyperpod_cluster_request, "eks"))["ClusterArn"]
    hyperpod_clock.advance(30 * MINUTE)
    [node, _] = [
        n["InstanceId"]
        for n in hyperpod_sagemaker.list_cluster_nodes(ClusterName="eks", InstanceGroupNameContains="worker")[
            "ClusterNodeSummaries"
        ]
    ]

    moved = hyperpod_sagemaker.move_cluster_nodes(
        SourceClusterArn=arn,
        SourceInstanceGroupName="worker-group-1",
        TargetClusterArn=arn,
        TargetInstanceGroupName="controller-machine",
        NodeIds=[node, "i-0123456789abcdef0"],
    )

    assert moved["Successful"] == [node]
    assert [f["Code"] for f in moved["Failed"]] == ["NodeIdNotFound"]
    assert _status(hyperpod_sagemaker, "eks", node) == ("worker-group-1", "DetachInProgress")
    assert node in {i.instance_id for i in hyperpod_sim.running_instances()}  # billed while it moves
    hyperpod_clock.advance(2 * MINUTE)
    assert _status(hyperpod_sagemaker, "eks", node) == ("controller-machine", "AttachInProgress")
    hyperpod_clock.advance(10 * MINUTE)
    assert _status(hyperpod_sagemaker, "eks", node) == ("controller-machine", "Running")
    groups = {
        g["InstanceGroupName"]: g["TargetCount"]
        for g in hyperpod_sagemaker.describe_cluster(ClusterName="eks")["InstanceGroups"]
    }
    assert groups == {"controller-machine": 2, "worker-group-1": 1}


def test_a_slurm_cluster_cannot_move_nodes(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())["ClusterArn"]
    hyperpod_clock.advance(30 * MINUTE)

    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.move_cluster_nodes(
            SourceClusterArn=arn,
            SourceInstanceGroupName="worker-group-1",
            TargetClusterArn=arn,
            TargetInstanceGroupName="controller-machine",
            InstanceCount=1,
        )

    assert error.value.response["Error"]["Code"] == "ValidationException"
