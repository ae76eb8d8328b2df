"""An operation (a create, a cleanup, a repair, a scale) and its steps, as the state table holds it."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator

from autopilot.models.records.base import (
    OperationStatus,
    OperationType,
    RecordModel,
    RepairActor,
    RepairTrigger,
    Time,
)
from autopilot.models.records.diagnosis import Diagnosis
from autopilot.models.records.repair import Fault, RepairAction


class Step(RecordModel):
    """One workflow step as the state machine recorded it (``$$.State.EnteredTime``)."""

    name: str
    entered_at: Time


class OperationError(RecordModel):
    error: str
    cause: str


class Operation(RecordModel):
    operation_id: str
    operation_type: OperationType
    cluster_name: str
    status: OperationStatus
    created_at: Time
    updated_at: Time
    requested_by: str | None = None
    # The Idempotency-Key request that made it (autopilot.idempotency.request_marker): a retry whose
    # first attempt failed after recording it is answered this operation.
    idempotency: str | None = None
    execution_arn: str | None = None
    steps: list[Step] = Field(default_factory=list)
    error: OperationError | None = None
    # Cleanup: resources still tagged with the cluster after it was deleted.
    leftovers: list[str] | None = None
    # CreateCluster: the cluster's ARN once SageMaker returned it, and whether a failure deleted it.
    cluster_arn: str | None = None
    rolled_back: bool | None = None
    # What went wrong without failing the operation (e.g. cost tags not applied after InService).
    warnings: list[str] | None = None
    # A failed create: why, from HyperPod's lifecycle logs (Create workflow, DiagnoseFailureFunction).
    diagnosis: Diagnosis | None = None
    # ReplaceNode: the faulty instance, what started the repair, the fault, who repairs, each action
    # taken, and the new instance a replace brought.
    node_id: str | None = None
    trigger: RepairTrigger | None = None
    fault: Fault | None = None
    actor: RepairActor | None = None
    actions: list[RepairAction] | None = None
    successor_node_id: str | None = None
    # ScaleInstanceGroup: the group and the count asked (the launch watcher's reference when the
    # UpdateCluster ends: logic/launch_watch.py).
    instance_group: str | None = None
    instance_count: int | None = None

    @field_validator("leftovers", mode="before")
    @classmethod
    def _parse_leftovers(cls, value: Any) -> Any:
        # The Cleanup workflow stores the list as JSON text (ASL cannot build a DynamoDB list of strings).
        return json.loads(value) if isinstance(value, str) else value
