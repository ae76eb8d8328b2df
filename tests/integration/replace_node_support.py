"""What the ReplaceNode workflow tests (test_asl_replace_node*.py) share: the cluster, the claim, the run.

Each test claims a repair as the healing code does (``HealingTable.claim_repair``: the operation, its
history and the node's open repair) and starts the execution named after it with the input the
workflow's model builds; the action is chosen by the test, not by the decide table. ``run`` steps the
frozen clock and plays ClusterEventsFunction's part: a Node Health event is held on the node item and
handed to ``node_health_changed`` (as the Node Health branch does), every other message (the
workflow's "await-node" requests) goes through ``handle_message``. Deadlines are kept far from the
simulator's durations (reboot 5 min, replace 10 min), so a lagging execution thread changes nothing.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from autopilot.dal.healing import HealingTable, healing_key, node_key
from autopilot.dal.table import key_attributes
from autopilot.logic.cluster_events import handle_message
from autopilot.logic.read_clusters import get_operation
from autopilot.models.bodies import OperationView
from autopilot.models.hyperpod_events import NODE_HEALTH, NodeHealthEvent
from autopilot.models.records import (
    Fault,
    NodeAction,
    NodeHealth,
    Operation,
    OperationStatus,
    OperationType,
    RepairTrigger,
    new_operation_id,
)
from autopilot.workflows.cluster_waits import ClusterWaits
from autopilot.workflows.inputs import RepairDeadlines, ReplaceNodeWorkflowInput
from autopilot.workflows.node_waits import node_health_changed

from sandbox.harness.stack import Deployed
from tests.integration.workflows import (
    Rounds,
    deliver_cluster_events,
    dependencies,
    history,
    stack_origin,
)
from tests.samples import create_body

STEP = 60.0  # simulated seconds a round advances the frozen clock
CLUSTER = "ml-cluster"
WORKERS = "worker-group-1"
CONTROLLER = "controller-machine"
# far from the simulator's reboot (5 min), replace (10 min) and HyperPod's own reboot (1 + 5 min)
DEADLINES = RepairDeadlines(reboot_seconds=1800, replace_seconds=3600, hyperpod_seconds=2400)


# --------------------------------------------------------------------------------------------------
# the cluster, the claim, the run
# --------------------------------------------------------------------------------------------------


def make_cluster(
    stack: Deployed, node_recovery: str = "None", *, deep_health_checks: bool = False
) -> dict[str, list[str]]:
    """An InService cluster in the simulator (3 groups: controller, login, 4 workers); ids by group.
    The workers run OnStartDeepHealthChecks only when asked: a new instance then spends
    HyperPodTimings.deep_health_check (AWS: about 2 h) in checks, longer than DEADLINES allow."""
    config = {k: v for k, v in create_body()["clusterConfig"].items() if k != "Tags"}
    config["NodeRecovery"] = node_recovery
    if not deep_health_checks:
        for group in config["InstanceGroups"]:
            group.pop("OnStartDeepHealthChecks", None)
    sagemaker = stack.client("sagemaker")
    sagemaker.create_cluster(**config)
    stack.clock.advance(3600 + (stack.hyperpod.timings.deep_health_check if deep_health_checks else 0))
    stack.hyperpod.tick()
    assert sagemaker.describe_cluster(ClusterName=CLUSTER)["ClusterStatus"] == "InService"
    groups: dict[str, list[str]] = {}
    for node in sagemaker.list_cluster_nodes(ClusterName=CLUSTER, MaxResults=100)["ClusterNodeSummaries"]:
        groups.setdefault(node["InstanceGroupName"], []).append(node["InstanceId"])
    deliver(stack)  # nothing waits yet: drain the creation's events
    return groups


def fault(stack: Deployed, node_id: str, fault_type: str = "NvidiaErrorReboot", **options: Any) -> Fault:
    """HMA finds a fault on the node (HyperPod does not repair it unless the options say so)."""
    options.setdefault("auto_recover", False)
    reported = stack.hyperpod.fault_node_unhealthy(CLUSTER, node_id, fault_type=fault_type, **options)
    stack.clock.advance(5)
    stack.hyperpod.tick()
    deliver(stack)  # the Unhealthy report is held on the node item
    return Fault(
        fault_type=fault_type,
        reason=reported["HealthStatusReason"],
        repair_action=reported["RepairAction"],
        recommendation=reported["Recommendation"],
        detected_at=stack.clock.now(),
    )


def healing_table(stack: Deployed) -> HealingTable:
    return HealingTable(stack.stack.physical_id("StateTable"), dynamodb=stack.client("dynamodb"))


def start_repair(
    stack: Deployed,
    node_id: str,
    action: NodeAction,
    found: Fault | None = None,
    *,
    deadlines: RepairDeadlines = DEADLINES,
    allow_replace: bool = True,
    trigger: RepairTrigger = RepairTrigger.EVENT,
    gpus_lost: bool = False,
) -> str:
    """Claim the repair and start its execution; the execution ARN."""
    now = stack.clock.now()
    operation = Operation(
        operation_id=new_operation_id(stack.clock.now()),
        operation_type=OperationType.REPLACE_NODE,
        cluster_name=CLUSTER,
        status=OperationStatus.RUNNING,
        created_at=now,
        updated_at=now,
        node_id=node_id,
        trigger=trigger,
        fault=found,
        actions=[],
    )
    table = healing_table(stack)
    assert table.claim_repair(operation, fault_at=found.detected_at if found else now)
    workflow_input = ReplaceNodeWorkflowInput(
        operation_id=operation.operation_id,
        cluster_name=CLUSTER,
        node_id=node_id,
        action=action,
        trigger=trigger,
        fault=found,
        deadlines=deadlines,
        allow_replace=allow_replace,
        gpus_lost=gpus_lost,
    )
    arn = str(
        stack.client("stepfunctions").start_execution(
            stateMachineArn=stack.stack.arn("ReplaceNodeStateMachine"),
            name=operation.operation_id,
            input=workflow_input.model_dump_json(by_alias=True),
        )["executionArn"]
    )
    table.set_execution_arn(operation.operation_id, arn)
    return arn


def deliver(stack: Deployed) -> list[str]:
    """Process what the cluster-events queue holds now, as ClusterEventsFunction does; their kinds."""
    return deliver_cluster_events(stack, lambda body, sent_at, waits: _handle(stack, body, sent_at, waits))


def _handle(stack: Deployed, body: dict[str, Any], sent_at: int, waits: ClusterWaits) -> str:
    """A Node Health event is held on the node item and handed to the waiting repair, as the Node
    Health branch does; every other message goes through ``handle_message``."""
    if body.get("detail-type") != NODE_HEALTH:
        return handle_message(body, sent_at, waits, origin=stack_origin(stack))
    detail = NodeHealthEvent.model_validate(body).detail
    health = NodeHealth(detail.HealthSummary.HealthStatus)
    held = healing_table(stack).record_health(
        detail.ClusterName,
        detail.InstanceId,
        health,
        reason=detail.HealthSummary.HealthStatusReason,
        at=datetime.fromisoformat(body["time"]),
    )
    if held is not None:
        node_health_changed(detail.ClusterName, detail.InstanceId, health, waits)
    return NODE_HEALTH


def run(
    stack: Deployed,
    *arns: str,
    events: bool = True,
    timeout: float = 300.0,
    each_round: Any = None,
    step: float = STEP,
) -> list[dict[str, Any]]:
    """Step the clock until every execution ended; their descriptions. The clock moves only while
    every running execution waits on a timer or a token, none moved since the last round and no
    timer is due (``Rounds.still``), so a starved execution thread does not see simulated minutes
    pass between two of its states."""
    sfn = stack.client("stepfunctions")
    deadline = time.monotonic() + timeout
    rounds = Rounds(stack)
    running = len(arns)
    while time.monotonic() < deadline:
        still = rounds.still(running)
        if still:
            stack.clock.advance(step)
        stack.hyperpod.tick()
        if events:
            deliver(stack)
        if each_round is not None:
            each_round()
        executions = [sfn.describe_execution(executionArn=arn) for arn in arns]
        running = sum(e["status"] == "RUNNING" for e in executions)
        if not running:
            return executions
        rounds.pause(running, advanced=still)
    raise AssertionError(f"executions still running after {timeout}s: {arns}")


def until_left(stack: Deployed, arn: str, state: str, timeout: float = 60.0) -> None:
    """With the clock still, until the execution has left ``state`` (what HyperPod is doing stays so)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.get("stateExitedEventDetails", {}).get("name") == state for e in history(stack, arn)):
            return
        time.sleep(0.05)
    raise AssertionError(f"{arn} did not leave {state} within {timeout}s")


def operation_of(execution: dict[str, Any]) -> OperationView:
    return get_operation(dependencies(), execution["executionArn"].rsplit(":", 1)[1])


def item(stack: Deployed, key: dict[str, str]) -> dict[str, Any]:
    got = stack.client("dynamodb").get_item(
        TableName=stack.stack.physical_id("StateTable"), Key=key_attributes(key), ConsistentRead=True
    )
    return dict(got.get("Item", {}))


def assert_released(stack: Deployed, execution: dict[str, Any], node_id: str) -> None:
    """The repair gave its slot and its node back."""
    operation_id = execution["executionArn"].rsplit(":", 1)[1]
    holders = item(stack, healing_key(CLUSTER)).get("leaseHolders", {}).get("SS", [])
    assert operation_id not in holders
    assert "openRepair" not in item(stack, node_key(CLUSTER, node_id))


def node_status(stack: Deployed, node_id: str) -> str:
    described = stack.client("sagemaker").describe_cluster_node(ClusterName=CLUSTER, NodeId=node_id)
    return str(described["NodeDetails"]["InstanceStatus"]["Status"])


def subscribe_alerts(stack: Deployed) -> str:
    """An SQS queue on the alerts topic (moto delivers SNS to SQS); its URL."""
    sqs = stack.client("sqs")
    url = sqs.create_queue(QueueName="captured-alerts")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    stack.client("sns").subscribe(
        TopicArn=stack.stack.physical_id("AlertsTopic"), Protocol="sqs", Endpoint=queue_arn
    )
    return str(url)


def alerts(stack: Deployed, url: str) -> list[dict[str, Any]]:
    messages = stack.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(json.loads(m["Body"])["Message"]) for m in messages]
