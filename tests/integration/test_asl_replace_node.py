"""The ReplaceNode workflow on moto's Step Functions executor, against the HyperPod simulator: our reboots and
replaces, their retries, escalations and failures (the harness: replace_node_support.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from autopilot.models.records import (
    NodeAction,
    OperationStatus,
)
from autopilot.workflows.inputs import RepairDeadlines

from tests.integration.replace_node_support import (
    CLUSTER,
    CONTROLLER,
    WORKERS,
    alerts,
    assert_released,
    fault,
    make_cluster,
    node_status,
    operation_of,
    run,
    start_repair,
    subscribe_alerts,
    until_left,
)
from tests.integration.workflows import (
    entered,
    history,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


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
