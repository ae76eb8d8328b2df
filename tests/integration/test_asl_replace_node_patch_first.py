"""ReplaceNode on a cluster that must run UpdateClusterSoftware before BatchReplaceClusterNodes works
(botocore's documentation of the operation): the refusal is recognised, never retried, and the repair
fails with the runbook step in its cause, which the Node Repair Failed event carries to the alerts topic."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.models.records import NodeAction

from tests.integration.replace_node_support import (
    CLUSTER,
    WORKERS,
    assert_released,
    fault,
    make_cluster,
    operation_of,
    run,
    start_repair,
)
from tests.integration.workflows import history

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_a_cluster_to_patch_first_fails_the_replace_with_the_runbook_step_at_once(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node, "NvidiaErrorTerminate")
    stack.hyperpod.apply_fault("software_update_required", {"cluster": CLUSTER})
    arn = start_repair(stack, node, NodeAction.REPLACE, found)

    [execution] = run(stack, arn, events=False)

    assert execution["status"] == "FAILED"
    calls = [
        e
        for e in history(stack, arn)
        if e["type"] == "TaskScheduled"
        and e["taskScheduledEventDetails"]["resource"].endswith("batchReplaceClusterNodes")
    ]
    assert len(calls) == 1  # not retried
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.ClusterSoftwareUpdateNeeded"
    assert "run UpdateClusterSoftware on the cluster" in operation.error.cause
    assert "then retry the repair" in operation.error.cause
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("replace", "refused")]
    [event] = [e for e in stack.operation_events() if e["detail"].get("operationType") == "ReplaceNode"]
    assert event["detail-type"] == "Node Repair Failed"  # FailedOperationsRule sends it to the alerts topic
    assert "UpdateClusterSoftware" in event["detail"]["cause"]
    assert_released(stack, execution, node)


def test_a_throttled_replace_is_still_retried(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node, "NvidiaErrorTerminate")
    stack.aws_calls.apply_fault(
        "throttling",
        {"rate": 1.0, "services": ["sagemaker"], "operations": ["BatchReplaceClusterNodes"], "times": 2},
    )
    arn = start_repair(stack, node, NodeAction.REPLACE, found)

    [execution] = run(stack, arn, events=False)

    assert execution["status"] == "SUCCEEDED"
    failed = [e["taskFailedEventDetails"]["error"] for e in history(stack, arn) if e["type"] == "TaskFailed"]
    assert failed == ["SageMaker.SageMakerException"] * 2
