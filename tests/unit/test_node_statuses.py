"""Every node status botocore knows is placed: billed or not (the spend meter), and a moving node
(MoveClusterNodes: DetachInProgress / AttachInProgress, botocore 1.44.8) is billed, never a repair's."""

from __future__ import annotations

import botocore.session
from autopilot.logic.healing.sweep import MOVING_STATUSES, STUCK_STATUSES
from autopilot.logic.spend_meter import BILLABLE_STATUSES, UNBILLED_STATUSES

_SHAPE = botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterInstanceStatus")
STATUSES = set(_SHAPE.enum)  # type: ignore[attr-defined]  # a StringShape's


def test_every_node_status_is_billed_or_not() -> None:
    # Fails when botocore adds a status: decide how AWS bills it.
    assert BILLABLE_STATUSES | UNBILLED_STATUSES == STATUSES
    assert not BILLABLE_STATUSES & UNBILLED_STATUSES


def test_a_moving_node_is_billed_and_neither_stuck_nor_failed() -> None:
    assert {"DetachInProgress", "AttachInProgress"} == MOVING_STATUSES
    assert MOVING_STATUSES <= BILLABLE_STATUSES
    assert not MOVING_STATUSES & STUCK_STATUSES
