"""One actor per node, through the HyperPod simulator (issue 19 item 2): the Node Health branch of
ClusterEventsFunction decides HyperPod's part from the cluster's NodeRecovery, which it reads from
DescribeCluster, whatever the event's RepairAction says. AWS's only Node Health sample says "None"
beside "Please Replace the Faulty Node."; the simulator sends either reading (node_unhealthy's
``repair_action``). The template deployed into moto; workflows recorded, not executed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from autopilot.dal.healing import HealingTable
from autopilot.logic.cluster_events import handle_message
from autopilot.logic.healing.node_health import NodeHealing
from autopilot.logic.healing.topology import TopologyReader
from autopilot.settings import HealingSettings
from autopilot.workflows.cluster_waits import ClusterWaits

from sandbox.emulator import seams
from sandbox.harness.stack import Deployed, deployed
from tests.integration.workflows import deliver_cluster_events, stack_origin
from tests.samples import create_body

CLUSTER = "ml-cluster"


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # EventBridge's events as the rule delivers them (moto's own delivery drops "account")
    with deployed(execute=False) as d, seams.installed(seams.keep_event_account):
        yield d


def active_cluster(stack: Deployed, node_recovery: str) -> list[str]:
    """A cluster Autopilot manages (ACTIVE in the registry), InService in the simulator; its workers."""
    table = stack.stack.physical_id("StateTable")
    stack.client("dynamodb").put_item(
        TableName=table,
        Item={
            "pk": {"S": f"CLUSTER#{CLUSTER}"},
            "sk": {"S": f"CLUSTER#{CLUSTER}"},
            "kind": {"S": "CLUSTER"},
            "clusterName": {"S": CLUSTER},
            "status": {"S": "ACTIVE"},
            "createdAt": {"S": "2026-11-22T09:00:00.000Z"},
            "updatedAt": {"S": "2026-11-22T09:00:00.000Z"},
            "lastOperationId": {"S": "op-20261122090000-00000000"},
        },
    )
    config = {k: v for k, v in create_body(CLUSTER)["clusterConfig"].items() if k != "Tags"}
    config["NodeRecovery"] = node_recovery
    sagemaker = stack.client("sagemaker")
    sagemaker.create_cluster(**config)
    stack.clock.advance(3600 + stack.hyperpod.timings.deep_health_check)
    listed = sagemaker.list_cluster_nodes(ClusterName=CLUSTER, InstanceGroupNameContains="worker")
    deliver(stack)  # the creation's events: nothing to heal
    return [n["InstanceId"] for n in listed["ClusterNodeSummaries"]]


def deliver(stack: Deployed) -> list[str]:
    """The cluster-events queue through handle_message with the Node Health branch's real dependencies."""
    settings = HealingSettings.from_environ(stack.environment("ClusterEventsFunction"))
    healing = NodeHealing(
        settings,
        table=HealingTable(settings.state_table_name, dynamodb=stack.client("dynamodb")),
        topology=TopologyReader(sagemaker=stack.client("sagemaker"), s3=stack.client("s3")),
        stepfunctions=stack.client("stepfunctions"),
        events=stack.client("events"),
        sns=stack.client("sns"),
        now=stack.clock.now,
    )

    def handle(body: dict[str, Any], sent_at: int, waits: ClusterWaits) -> str:
        return handle_message(body, sent_at, waits, healing, origin=stack_origin(stack))

    stack.clock.advance(stack.hyperpod.timings.event_delivery)
    stack.hyperpod.tick()
    return deliver_cluster_events(stack, handle)


def repairs(stack: Deployed) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.stack.arn("ReplaceNodeStateMachine"))["executions"]
    return [json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"]) for e in listed]


@pytest.mark.parametrize(
    ("node_recovery", "repair_action", "action"),
    [
        # HyperPod replaces the node: Autopilot only watches, though the event says "None"
        ("Automatic", "None", "observe"),
        ("Automatic", None, "observe"),  # the simulator's own reading: Replace
        # nobody else repairs: Autopilot does, whatever the event names
        ("None", "None", "replace"),
        ("None", "Replace", "replace"),
    ],
)
def test_who_repairs_comes_from_node_recovery_not_repair_action(
    stack: Deployed, node_recovery: str, repair_action: str | None, action: str
) -> None:
    node = active_cluster(stack, node_recovery)[0]
    fault: dict[str, Any] = {"cluster": CLUSTER, "node_id": node, "fault_type": "NvidiaErrorTerminate"}
    if repair_action is not None:
        fault["repair_action"] = repair_action

    reported = stack.hyperpod.apply_fault("node_unhealthy", fault)
    deliver(stack)

    assert reported["AutoRecovery"] is (node_recovery == "Automatic")
    [started] = repairs(stack)
    assert (started["nodeId"], started["action"]) == (node, action)
    assert started["fault"]["repairAction"] == reported["RepairAction"]
    # the workers run OnStartDeepHealthChecks: a replacement's checks are in the deadlines
    settings = HealingSettings.from_environ(stack.environment("ClusterEventsFunction"))
    assert started["deadlines"]["hyperpodSeconds"] == 60 * (
        settings.hyperpod_repair_deadline_minutes + settings.deep_health_check_minutes
    )
