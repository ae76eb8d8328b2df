"""The ReplaceNode workflow on moto's Step Functions executor, against the HyperPod simulator.

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

import pytest
from autopilot.dal.healing import HealingTable, healing_key, node_key
from autopilot.dal.table import key_attributes
from autopilot.logic.cluster_events import handle_message
from autopilot.logic.healing.start_repair import repair_deadlines
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
from autopilot.settings import HealingSettings
from autopilot.workflows.cluster_waits import ClusterWaits
from autopilot.workflows.inputs import RepairDeadlines, ReplaceNodeWorkflowInput
from autopilot.workflows.node_waits import node_health_changed

from sandbox.harness.stack import Deployed
from tests.integration.workflows import (
    Rounds,
    deliver_cluster_events,
    dependencies,
    entered,
    history,
    stack_origin,
)
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
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


# --------------------------------------------------------------------------------------------------
# the paths
# --------------------------------------------------------------------------------------------------


def test_a_reboot_that_heals_ends_on_the_nodes_healthy_event(make_stack: Any) -> None:
    # no fallback check within the test: the Healthy Node Health Event is what ends the wait
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    node = make_cluster(stack)[WORKERS][0]
    arn = start_repair(stack, node, NodeAction.REBOOT, fault(stack, node))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert states.count("Reboot Node") == 1
    assert states.count("Await Node") == 1  # answered by the event, not after FallbackPollSeconds
    # the first look at the node waits until its reboot has begun
    assert states.index("Let Reboot Begin") == states.index("Await Node") - 1
    assert states.count("Check Node") == 1  # the verification: Running
    assert "Replace Node" not in states
    operation = operation_of(execution)
    assert operation.status is OperationStatus.SUCCEEDED
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("reboot", "succeeded")]
    assert operation.successor_node_id is None
    assert node_status(stack, node) == "Running"
    assert_released(stack, execution, node)
    [event] = [e for e in stack.operation_events() if e["detail"].get("operationType") == "ReplaceNode"]
    assert event["detail-type"] == "Node Repaired"
    assert event["detail"]["nodeId"] == node
    assert event["detail"]["status"] == "SUCCEEDED"


def test_a_reboot_that_does_not_heal_escalates_to_a_replace(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    stack.hyperpod.fault_reboot_does_not_heal(CLUSTER, node)
    arn = start_repair(stack, node, NodeAction.REBOOT, found)

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    actions = operation.actions or []
    assert [(a.action.value, a.result.value) for a in actions] == [
        ("reboot", "timed-out"),
        ("replace", "succeeded"),
    ]
    successor = operation.successor_node_id
    assert successor is not None
    assert successor != node
    assert actions[1].successor_node_id == successor
    assert node_status(stack, successor) == "Running"
    nodes = stack.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER, MaxResults=100)
    assert node not in [n["InstanceId"] for n in nodes["ClusterNodeSummaries"]]
    assert_released(stack, execution, node)
    [event] = [e for e in stack.operation_events() if e["detail"].get("operationType") == "ReplaceNode"]
    assert event["detail"]["successorNodeId"] == successor


def test_a_node_in_use_is_retried_until_the_call_takes_it(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    # someone else's reboot is in flight: HyperPod answers the workflow's call with InstanceIdInUse
    stack.client("sagemaker").batch_reboot_cluster_nodes(ClusterName=CLUSTER, NodeIds=[node])
    arn = start_repair(stack, node, NodeAction.REBOOT, found)
    until_left(stack, arn, "Reboot Node")  # the first call, while the other reboot still runs

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    events = history(stack, arn)
    states = entered(events)
    assert states.count("Wait Before Retry") >= 1
    assert states.count("Reboot Node") == states.count("Wait Before Retry") + 1
    answers = [
        json.loads(e["stateExitedEventDetails"]["output"])
        for e in events
        if e.get("stateExitedEventDetails", {}).get("name") == "Reboot Node"
    ]
    assert answers[0] == {"NodeId": node, "ErrorCode": "InstanceIdInUse", "Message": answers[0]["Message"]}
    assert answers[-1] == {}  # the last call took the node
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("reboot", "succeeded")]


def test_throttled_sagemaker_calls_are_retried_to_success(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=120)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    stack.hyperpod.fault_reboot_does_not_heal(CLUSTER, node)
    stack.aws_calls.apply_fault(
        "throttling",
        {
            "rate": 0.5,
            "services": ["sagemaker"],
            "operations": [
                "DescribeClusterNode",
                "BatchRebootClusterNodes",
                "BatchReplaceClusterNodes",
                "ListClusterNodes",
            ],
            "seed": 5,
        },
    )
    arn = start_repair(stack, node, NodeAction.REBOOT, found)

    [execution] = run(stack, arn, events=False)  # the fallback checks see the node

    assert execution["status"] == "SUCCEEDED"
    failed = [e for e in history(stack, arn) if e["type"] == "TaskFailed"]
    assert failed, "the seeded plan throttles at least one call"
    assert {e["taskFailedEventDetails"]["error"] for e in failed} == {"SageMaker.SageMakerException"}
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [
        ("reboot", "timed-out"),
        ("replace", "succeeded"),
    ]


def test_a_controller_node_is_alerted_not_repaired(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    controller = make_cluster(stack)[CONTROLLER][0]
    captured = subscribe_alerts(stack)
    arn = start_repair(stack, controller, NodeAction.ALERT, fault(stack, controller, "NvidiaErrorTerminate"))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert not {"Acquire Lease", "Reboot Node", "Replace Node"} & set(states)
    operation = operation_of(execution)
    assert operation.status is OperationStatus.SUCCEEDED
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("alert", "succeeded")]
    [alert] = alerts(stack, captured)
    assert alert["nodeId"] == controller
    assert alert["operationId"] == operation.operation_id
    assert "Slurm controller" in alert["reason"]
    assert alert["fault"]["faultType"] == "NvidiaErrorTerminate"
    assert node_status(stack, controller) == "Running"  # untouched
    assert_released(stack, execution, controller)


def test_a_node_in_a_status_hyperpod_refuses_is_retried_until_the_deadline(make_stack: Any) -> None:
    # InvalidInstanceStatus: "Wait for the instance to finish any ongoing changes before retrying" (the
    # API reference); the simulator answers it for a controller's replace, which never changes
    stack = make_stack(clock_speed=0)
    controller = make_cluster(stack)[CONTROLLER][0]
    arn = start_repair(
        stack,
        controller,
        NodeAction.REPLACE,
        fault(stack, controller, "NvidiaErrorTerminate"),
        deadlines=RepairDeadlines(reboot_seconds=1800, replace_seconds=600, hyperpod_seconds=2400),
    )

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    assert execution["error"] == "Autopilot.ReplaceNodeFailed"
    states = entered(history(stack, arn))
    assert states.count("Replace Node") >= 2  # retried
    assert "Action Refused" not in states
    operation = operation_of(execution)
    assert operation.status is OperationStatus.FAILED
    assert operation.error is not None
    assert operation.error.error == "Autopilot.RepairTimedOut"
    [action] = operation.actions or []
    assert (action.action.value, action.result.value, action.error_code) == (
        "replace",
        "timed-out",
        "InvalidInstanceStatus",
    )
    assert node_status(stack, controller) == "Running"
    assert_released(stack, execution, controller)
    [event] = [e for e in stack.operation_events() if e["detail"].get("operationType") == "ReplaceNode"]
    assert event["detail-type"] == "Node Repair Failed"  # FailedOperationsRule sends it to the alerts topic
    assert event["detail"]["error"] == "Autopilot.RepairTimedOut"


def test_an_unexpected_failure_releases_the_slot_and_fails_with_its_cause(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    stack.aws_calls.apply_fault(
        "throttling", {"rate": 1.0, "services": ["sagemaker"], "operations": ["BatchRebootClusterNodes"]}
    )
    arn = start_repair(stack, node, NodeAction.REBOOT, found)

    [execution] = run(stack, arn, events=False)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "SageMaker.SageMakerException"  # the retries ran out
    assert "Release Lease" in entered(history(stack, arn))
    assert_released(stack, execution, node)


def test_hyperpods_own_repair_is_observed_without_a_call(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    arn = start_repair(stack, node, NodeAction.OBSERVE, fault(stack, node, auto_recover=True))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert not {"Reboot Node", "Replace Node"} & set(states)  # never two actors on one node
    assert states.count("Await Node") == 1
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("observe", "succeeded")]


def test_a_node_hyperpod_replaces_itself_is_followed_to_its_successor(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    found = fault(stack, node, "NvidiaErrorTerminate", auto_recover=True)  # HyperPod replaces it
    arn = start_repair(stack, node, NodeAction.OBSERVE, found)

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert not {"Reboot Node", "Replace Node"} & set(states)
    assert "Find Successor" in states
    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert successor is not None
    assert successor != node
    assert [(a.action.value, a.result.value, a.successor_node_id) for a in operation.actions or []] == [
        ("observe", "succeeded", successor)
    ]
    assert node_status(stack, successor) == "Running"


def test_hyperpods_repair_that_stalls_is_escalated_to_a_replace(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    # HyperPod says it repairs the node, and never does
    arn = start_repair(stack, node, NodeAction.OBSERVE, fault(stack, node, "NvidiaErrorTerminate"))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [
        ("observe", "timed-out"),
        ("replace", "succeeded"),
    ]
    assert operation.successor_node_id is not None
    assert node_status(stack, operation.successor_node_id) == "Running"


def test_a_hyperpod_replacement_in_deep_health_checks_is_not_replaced_a_second_time(make_stack: Any) -> None:
    # The deadlines ClusterEventsFunction gives a node of a deep-health group (the template's defaults):
    # HyperPod's replacement spends ~2 h in checks, past HyperPodRepairDeadlineMinutes (90) alone, which
    # escalated a repair working as designed to a second replace.
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic", deep_health_checks=True)[WORKERS][0]
    settings = HealingSettings.from_environ(stack.environment("ClusterEventsFunction"))
    deadlines = repair_deadlines(settings, deep_health_checks=True)
    checks = stack.hyperpod.timings.deep_health_check
    assert settings.hyperpod_repair_deadline_minutes * 60 < checks < deadlines.hyperpod_seconds
    found = fault(stack, node, "NvidiaErrorTerminate", auto_recover=True)  # HyperPod replaces it

    # 10-minute rounds: the replacement's ~2 h of checks in a dozen, not 120
    [execution] = run(
        stack, start_repair(stack, node, NodeAction.OBSERVE, found, deadlines=deadlines), step=600.0
    )

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert [(a.action.value, a.result.value, a.successor_node_id) for a in operation.actions or []] == [
        ("observe", "succeeded", successor)
    ]
    assert successor is not None
    assert node_status(stack, successor) == "Running"
    assert stack.hyperpod.node_repairs[(CLUSTER, node, "replace")] == 1  # HyperPod's own, only


def test_a_node_that_may_only_be_rebooted_is_not_replaced(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    login = make_cluster(stack)["login-group"][0]
    found = fault(stack, login)
    stack.hyperpod.fault_reboot_does_not_heal(CLUSTER, login)
    arn = start_repair(stack, login, NodeAction.REBOOT, found, allow_replace=False)

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.RepairTimedOut"
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("reboot", "timed-out")]
    assert "Replace Node" not in entered(history(stack, arn))
    assert_released(stack, execution, login)


def test_the_lease_caps_concurrent_repairs(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, MaxConcurrentRepairs=2)
    workers = make_cluster(stack)[WORKERS]
    found = {node: fault(stack, node) for node in workers}
    arns = [start_repair(stack, node, NodeAction.REBOOT, found[node]) for node in workers]
    holding: list[int] = []

    def count_holders() -> None:
        holders = item(stack, healing_key(CLUSTER)).get("leaseHolders", {}).get("SS", [])
        holding.append(len(holders))

    executions = run(stack, *arns, each_round=count_holders)

    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(workers)
    assert max(holding) == 2  # the cap held, and was used
    waited = [entered(history(stack, arn)).count("Wait For Lease") for arn in arns]
    assert sum(1 for w in waited if w) >= 2  # two repairs waited for a slot
    assert all(node_status(stack, node) == "Running" for node in workers)
    for execution, node in zip(executions, workers, strict=True):
        assert_released(stack, execution, node)


def test_a_paused_cluster_starts_no_repair_until_the_deadline(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    now = stack.clock.now()
    assert healing_table(stack).pause(
        CLUSTER, by="arn:aws:iam::123456789012:user/ops", reason="test", now=now
    )
    arn = start_repair(
        stack,
        node,
        NodeAction.REBOOT,
        found,
        # A repair waits for its slot until 23 h minus its action deadlines (at least replaceSeconds):
        # here 600 s, so the test steps ten minutes, not twenty hours.
        deadlines=RepairDeadlines(reboot_seconds=41000, replace_seconds=600, hyperpod_seconds=41000),
    )

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.NoRepairSlot"
    assert "Reboot Node" not in entered(history(stack, arn))
    assert_released(stack, execution, node)


def test_an_operators_repair_on_a_paused_cluster_takes_a_slot_and_completes(make_stack: Any) -> None:
    # the pause holds automatic repairs only: POST .../reboot (trigger api) is an operator's explicit request
    stack = make_stack(clock_speed=0, MaxConcurrentRepairs=1)
    node, other = make_cluster(stack)[WORKERS][:2]
    found = fault(stack, node)
    now = stack.clock.now()
    assert healing_table(stack).pause(
        CLUSTER, by="arn:aws:iam::123456789012:user/ops", reason="test", now=now
    )
    arn = start_repair(stack, node, NodeAction.REBOOT, found, trigger=RepairTrigger.API)
    automatic = start_repair(
        stack,
        other,
        NodeAction.REBOOT,
        fault(stack, other),
        deadlines=RepairDeadlines(reboot_seconds=41000, replace_seconds=600, hyperpod_seconds=41000),
    )

    operator, held = run(stack, arn, automatic)

    assert operator["status"] == "SUCCEEDED"
    assert entered(history(stack, arn)).count("Reboot Node") == 1
    assert node_status(stack, node) == "Running"
    assert_released(stack, operator, node)
    # the same pause still holds the automatic repair beside it
    assert held["status"] == "FAILED"
    assert operation_of(held).error is not None
    assert "Reboot Node" not in entered(history(stack, automatic))
