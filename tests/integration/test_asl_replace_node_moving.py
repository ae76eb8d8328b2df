"""ReplaceNode on a node MoveClusterNodes is moving (DetachInProgress): not a failure, and nothing
HyperPod would let Autopilot reboot or replace; the repair ends at once instead of retrying a refused
call until its deadline."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.models.records import Fault, NodeAction

from tests.integration.replace_node_support import (
    CLUSTER,
    WORKERS,
    assert_released,
    fault,
    operation_of,
    run,
    start_repair,
    until_left,
)
from tests.integration.workflows import entered, history
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
EKS = {"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}}


def eks_continuous_cluster(stack: Any) -> tuple[str, str, str]:
    """An InService EKS cluster in Continuous mode whose login group can take a worker: (ARN, a worker
    node, that group)."""
    config = {k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"}
    config.update(Orchestrator=EKS, NodeProvisioningMode="Continuous", NodeRecovery="None")
    groups = config["InstanceGroups"]
    for group in groups:
        group.pop("OnStartDeepHealthChecks", None)
    groups[1]["InstanceType"] = groups[2]["InstanceType"]
    sagemaker = stack.client("sagemaker")
    arn = sagemaker.create_cluster(**config)["ClusterArn"]
    stack.clock.advance(3600)
    stack.hyperpod.tick()
    node = sagemaker.list_cluster_nodes(ClusterName=CLUSTER, InstanceGroupNameContains=WORKERS)[
        "ClusterNodeSummaries"
    ][0]["InstanceId"]
    return str(arn), str(node), str(groups[1]["InstanceGroupName"])


def move(stack: Any, arn: str, node: str, group: str) -> None:
    stack.client("sagemaker").move_cluster_nodes(
        SourceClusterArn=arn,
        SourceInstanceGroupName=WORKERS,
        TargetClusterArn=arn,
        TargetInstanceGroupName=group,
        NodeIds=[node],
    )


def test_a_repair_of_a_moving_node_ends_without_a_call(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    arn, node, group = eks_continuous_cluster(stack)
    move(stack, arn, node, group)
    found = Fault(reason="fault type NvidiaErrorReboot", detected_at=stack.clock.now())

    execution_arn = start_repair(stack, node, NodeAction.REBOOT, found)
    [execution] = run(stack, execution_arn, events=False)

    assert execution["status"] == "SUCCEEDED"
    assert "Reboot Node" not in entered(history(stack, execution_arn))
    [action] = operation_of(execution).actions or []
    assert (action.result.value, action.error_code) == ("succeeded", "NodeMoving")
    assert_released(stack, execution, node)


def test_a_node_moved_while_the_repair_waits_ends_it(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=120)
    arn, node, group = eks_continuous_cluster(stack)
    found = fault(stack, node)
    stack.hyperpod.fault_reboot_does_not_heal(CLUSTER, node)  # Running again, still reported unhealthy
    execution_arn = start_repair(stack, node, NodeAction.REBOOT, found)
    until_left(stack, execution_arn, "Reboot Node")
    stack.clock.advance(6 * 60)  # the reboot is over
    stack.hyperpod.tick()

    move(stack, arn, node, group)
    [execution] = run(stack, execution_arn, events=False)

    assert execution["status"] == "SUCCEEDED"
    actions = operation_of(execution).actions or []
    assert [(a.action.value, a.result.value, a.error_code) for a in actions] == [
        ("reboot", "succeeded", "NodeMoving")
    ]
