"""A cluster's history entry: one per operation started on it."""

from __future__ import annotations

from autopilot.models.records.base import OperationType, RecordModel, Time


class HistoryEntry(RecordModel):
    cluster_name: str
    at: Time
    operation_id: str
    operation_type: OperationType
    requested_by: str | None = None
