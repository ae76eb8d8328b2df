"""What a repair answers and what it did: its fault and its actions, as its operation holds them."""

from __future__ import annotations

from autopilot.models.records.base import ActionResult, NodeAction, RecordModel, Time


class Fault(RecordModel):
    """The fault a repair answers, from the Node Health event's HealthSummary (or the sweep's view)."""

    # The HMA fault type named in HealthStatusReason ("... detected fault type X ..."), if any.
    fault_type: str | None = None
    reason: str | None = None
    # HyperPod's own RepairAction: what HyperPod itself will do ("None" when NodeRecovery is None).
    repair_action: str | None = None
    recommendation: str | None = None
    detected_at: Time


class RepairAction(RecordModel):
    """One action a repair took and how it ended (the ReplaceNode workflow appends them)."""

    action: NodeAction
    at: Time
    result: ActionResult
    error_code: str | None = None
    message: str | None = None
    successor_node_id: str | None = None
