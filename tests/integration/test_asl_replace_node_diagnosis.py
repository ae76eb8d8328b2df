"""A replacement whose new instance fails its lifecycle scripts: the ReplaceNode workflow's Diagnose
Launch reads the successor's lifecycle stream, and the failed repair's record and Node Repair Failed
event carry the diagnosis."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.models.records import NodeAction

from tests.integration.replace_node_support import (
    CLUSTER,
    WORKERS,
    fault,
    make_cluster,
    operation_of,
    run,
    start_repair,
)
from tests.integration.workflows import entered, history

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
# aws/aws-parallelcluster issue #4057: the FSx for Lustre mount a lifecycle script makes
FSX_MOUNT = (
    "STDERR: mount.lustre: mount fs-043c863f083c90c07.fsx.us-east-2.amazonaws.com@tcp:/oczhpbmv at /mnt/fsx "
    "failed: No such device"
)


def test_a_replacement_whose_new_instance_fails_its_scripts_is_diagnosed(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node, "NvidiaErrorTerminate")
    stack.hyperpod.fault_lifecycle_failure(cluster=CLUSTER, group=WORKERS, lines=[FSX_MOUNT])
    arn = start_repair(stack, node, NodeAction.REPLACE, found)

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    assert "Diagnose Launch" in entered(history(stack, arn))
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.RepairTimedOut"
    successor = operation.successor_node_id
    assert successor is not None
    diagnosis = operation.diagnosis
    assert diagnosis is not None
    assert diagnosis.category == "fsx-mount-failed"
    assert (diagnosis.evidence[0].stream, diagnosis.evidence[0].line) == (
        f"LifecycleConfig/{WORKERS}/{successor}",
        FSX_MOUNT,
    )
    [event] = [e for e in stack.operation_events() if e["detail-type"] == "Node Repair Failed"]
    assert event["detail"]["diagnosis"]["category"] == "fsx-mount-failed"
