"""ReplaceNode on a node MoveClusterNodes is moving (DetachInProgress): not a failure, and nothing
HyperPod would let Autopilot reboot or replace; the repair ends at once instead of retrying a refused
call until its deadline."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.models.records import Fault, NodeAction, iso

from tests.events import create_body
from tests.integration.test_asl_replace_node import (
    CLUSTER,
    WORKERS,
    assert_released,
    operation_of,
    run,
    start_repair,
)
from tests.integration.workflows import entered, history

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
EKS = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}}


def test_a_repair_of_a_moving_node_ends_without_a_call(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    config = {k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"}
    config.update(Orchestrator=EKS, NodeProvisioningMode="Continuous", NodeRecovery="None")
    groups = config["InstanceGroups"]
    for group in groups:
        group.pop("OnStartDeepHealthChecks", None)
    groups[1]["InstanceType"] = groups[2]["InstanceType"]  # the login group can take a worker
    sagemaker = stack.client("sagemaker")
    arn = sagemaker.create_cluster(**config)["ClusterArn"]
    stack.clock.advance(3600)
    stack.hyperpod.tick()
    node = sagemaker.list_cluster_nodes(ClusterName=CLUSTER, InstanceGroupNameContains=WORKERS)[
        "ClusterNodeSummaries"
    ][0]["InstanceId"]
    sagemaker.move_cluster_nodes(
        SourceClusterArn=arn,
        SourceInstanceGroupName=WORKERS,
        TargetClusterArn=arn,
        TargetInstanceGroupName=groups[1]["InstanceGroupName"],
        NodeIds=[node],
    )
    found = Fault(reason="fault type NvidiaErrorReboot", detected_at=iso(stack.clock.now()))

    arn = start_repair(stack, node, NodeAction.REBOOT, found)
    [execution] = run(stack, arn, events=False)

    assert execution["status"] == "SUCCEEDED"
    assert "Reboot Node" not in entered(history(stack, arn))
    [action] = operation_of(execution).actions or []
    assert (action.result.value, action.error_code) == ("succeeded", "NodeMoving")
    assert_released(stack, execution, node)
