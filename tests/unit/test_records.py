"""Records hold times as datetimes and the table as ISO text; the API's views are the records' projections.

The DAL's edge (autopilot/dal/table.py ``to_item``/``from_item``) writes a record's times as ``records.iso``
("2026-11-22T12:15:00.000Z": what the workflows' ``$states.context`` times and ``$now()`` are too, so
stored times compare as strings) and reads back any ISO 8601 text a table may hold. The views in
models/bodies.py are built from the record (logic/read_operations.py, read_clusters.py), not copied
field by field: a field the view shows is the record's, with the record's type.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any

import pytest
from autopilot.dal.state_table import history_put, operation_put
from autopilot.dal.table import from_item, history_key, to_item
from autopilot.logic.read_operations import operation_view
from autopilot.models.agent import AgentRecord
from autopilot.models.bodies import (
    AgentView,
    ClusterSummary,
    ClusterView,
    HealingView,
    NodeHealthView,
    OperationView,
)
from autopilot.models.records import (
    ActionResult,
    Cluster,
    ClusterStatus,
    Diagnosis,
    DiagnosisConfidence,
    Evidence,
    Fault,
    HealingState,
    HistoryEntry,
    NodeAction,
    NodeRecord,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    RepairAction,
    RepairActor,
    RepairTrigger,
    Step,
    iso,
)
from pydantic import BaseModel
from pydantic.fields import FieldInfo

AT = datetime(2026, 11, 22, 12, 15, 0, 123456, tzinfo=UTC)
STORED = "2026-11-22T12:15:00.123Z"


def full_operation() -> Operation:
    """An operation with every field set (a new record field is set here, or the projection test fails)."""
    return Operation(
        operation_id="op-20261122121500-0123abcd",
        operation_type=OperationType.REPLACE_NODE,
        cluster_name="ml-cluster",
        status=OperationStatus.FAILED,
        created_at=AT,
        updated_at=AT + timedelta(minutes=5),
        requested_by="arn:aws:iam::123456789012:role/ops",
        idempotency="idem-1",
        execution_arn="arn:aws:states:us-east-1:123456789012:execution:ReplaceNode:op-1",
        steps=[Step(name="Reboot Node", entered_at=AT + timedelta(seconds=1))],
        error=OperationError(error="States.Timeout", cause="the node did not come back"),
        leftovers=["arn:aws:s3:::bucket"],
        cluster_arn="arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
        rolled_back=False,
        warnings=["cost tags not applied"],
        diagnosis=Diagnosis(
            category="lifecycle-script",
            summary="on_create.sh failed",
            fix="fix the script",
            evidence=[Evidence(stream="i-1", line="exit 1")],
            confidence=DiagnosisConfidence.HIGH,
        ),
        node_id="i-0123456789abcdef0",
        trigger=RepairTrigger.EVENT,
        fault=Fault(fault_type="NvidiaGpuXidError", reason="xid 79", detected_at=AT),
        actor=RepairActor.AUTOPILOT,
        actions=[RepairAction(action=NodeAction.REBOOT, at=AT, result=ActionResult.FAILED, error_code="X")],
        successor_node_id="i-0fedcba9876543210",
        instance_group="worker-group-1",
        instance_count=4,
    )


def test_a_records_times_are_utc_datetimes_to_the_millisecond_the_table_keeps() -> None:
    operation = full_operation()

    assert operation.created_at == datetime(2026, 11, 22, 12, 15, 0, 123000, tzinfo=UTC)
    assert operation.created_at.tzinfo is UTC
    assert Step(
        name="s", entered_at=datetime(2026, 11, 22, 13, 15, tzinfo=timezone(timedelta(hours=1)))
    ) == Step(name="s", entered_at=datetime(2026, 11, 22, 12, 15, tzinfo=UTC))


def test_the_table_holds_a_records_times_as_iso_text_and_reads_them_back_equal() -> None:
    operation = full_operation()
    item = to_item({"pk": "p", "sk": "s"}, "OPERATION", operation)

    assert item["createdAt"] == {"S": STORED}
    assert item["updatedAt"] == {"S": "2026-11-22T12:20:00.123Z"}
    assert item["steps"]["L"][0]["M"]["enteredAt"] == {"S": "2026-11-22T12:15:01.123Z"}
    assert item["fault"]["M"]["detectedAt"] == {"S": STORED}
    assert item["actions"]["L"][0]["M"]["at"] == {"S": STORED}
    assert from_item(Operation, item) == operation


@pytest.mark.parametrize(
    "stored",
    [
        STORED,  # records.iso, $states.context.State.EnteredTime, $now()
        "2026-11-22T12:15:00.123+00:00",
        "2026-11-22T12:15:00.123456Z",  # microseconds (moto's executor wrote them)
        "2026-11-22T12:15:00.123",  # no zone: UTC
        "2026-11-22T13:15:00.123+01:00",
    ],
)
def test_times_a_table_may_hold_read_as_the_same_moment(stored: str) -> None:
    item = {"clusterName": {"S": "c"}, "at": {"S": stored}, "operationId": {"S": "op"}}
    item["operationType"] = {"S": "CreateCluster"}

    assert from_item(HistoryEntry, item).at == datetime(2026, 11, 22, 12, 15, 0, 123000, tzinfo=UTC)


def test_every_time_field_of_the_node_and_healing_items_is_a_datetime() -> None:
    node = NodeRecord.model_validate(
        {"clusterName": "c", "nodeId": "i-1", "healthSince": STORED, "lastFaultAt": STORED}
    )
    healing = HealingState.model_validate(
        {"clusterName": "c", "pausedAt": STORED, "trippedAt": STORED, "unhealthyReports": {"i-1": STORED}}
    )

    assert node.health_since == node.last_fault_at == AT.replace(microsecond=123000)
    assert healing.paused_at == healing.tripped_at == healing.unhealthy_reports["i-1"] == node.health_since
    assert healing.model_dump(mode="json", by_alias=True)["unhealthyReports"] == {"i-1": STORED}


def test_an_operations_history_key_and_entry_spell_its_time_as_the_table_does() -> None:
    operation = full_operation()
    history = history_put("table", operation)["Put"]["Item"]

    assert history["sk"] == {"S": f"HISTORY#{STORED}#{operation.operation_id}"}
    assert history["at"] == {"S": STORED}
    assert operation_put("table", operation)["Put"]["Item"]["createdAt"] == {"S": STORED}
    entry = HistoryEntry(
        cluster_name="c", at=AT, operation_id="op-1", operation_type=OperationType.CREATE_CLUSTER
    )
    assert history_key(entry)["sk"] == f"HISTORY#{STORED}#op-1"


# Operation fields the API does not show: the idempotency marker, and the scale's group and count.
NOT_SHOWN = {"operation_type", "idempotency", "instance_group", "instance_count"}


def test_the_operation_view_is_the_records_projection() -> None:
    operation = full_operation()
    view = operation_view(operation)
    shown = view.model_dump(mode="json", by_alias=True)

    assert set(OperationView.model_fields) - {"kind"} == set(Operation.model_fields) - NOT_SHOWN
    assert shown.pop("kind") == "ReplaceNode"
    assert shown == operation.model_dump(mode="json", by_alias=True, exclude={*NOT_SHOWN})
    assert shown["createdAt"] == STORED


def test_a_cluster_summary_is_the_cluster_records_projection() -> None:
    cluster = Cluster(
        cluster_name="ml-cluster",
        status=ClusterStatus.ACTIVE,
        created_at=AT,
        updated_at=AT,
        last_operation_id="op-1",
        owner="me",
        growth_blocked_until=AT,
    )
    fields: dict[str, Any] = {
        name: Cluster.model_fields[name].annotation for name in ClusterSummary.model_fields
    }

    assert fields == {name: f.annotation for name, f in ClusterSummary.model_fields.items()}
    summary = ClusterSummary.model_validate(cluster.model_dump(include=set(ClusterSummary.model_fields)))
    assert summary.model_dump(mode="json", by_alias=True)["createdAt"] == iso(AT)


def _declared(field: FieldInfo) -> Any:
    """The field's type as declared: pydantic keeps a bare ``Annotated`` type's metadata (Time's
    validator and serializer) apart from its annotation, but not that of ``Time | None``."""
    return Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation


# A view's field its builder fills when the record's is null: a node with no health report is Healthy
# (logic/read_nodes.py).
FILLED = {(NodeHealthView, "status")}


@pytest.mark.parametrize(
    ("view", "record", "own"),
    [
        # the view's own: the operation type is its "kind"; the error shape is named for the API
        (OperationView, Operation, {"kind", "error"}),
        (ClusterSummary, Cluster, set()),
        # computed or SageMaker's; budgetEnforcement is the record's text read as its enum
        (
            ClusterView,
            Cluster,
            {"growth_blocked", "account_budgets", "sagemaker", "agent", "history", "budget_enforcement"},
        ),
        (HealingView, HealingState, {"breaker", "active_repairs", "max_concurrent_repairs"}),
        # renamed by validation aliases: status is the record's health (Healthy when it has none), reason
        # its health_reason, since its health_since
        (NodeHealthView, NodeRecord, set()),
        # computed from lastSeen and the clock; version is the record's agent_version
        (AgentView, AgentRecord, {"status"}),
    ],
)
def test_a_field_a_view_takes_from_its_record_is_the_records_field(
    view: type[BaseModel],
    record: type[BaseModel],
    own: set[str],
) -> None:
    # view field -> the record's field it is validated from: a validation alias other than its wire name
    # (the record's field name), else its own name
    names = {
        n: alias if isinstance(alias := f.validation_alias, str) and alias != f.alias else n
        for n, f in view.model_fields.items()
        if n not in own
    }

    assert set(names.values()) <= set(record.model_fields)
    # the record's type, or (a view of a cluster Autopilot has no record of) the record's type or null, or
    # (a null its builder fills in) the record's type without null
    differ = {
        n: (shown, kind)
        for n, r in names.items()
        if (shown := _declared(view.model_fields[n]))
        not in ((kind := _declared(record.model_fields[r])), kind | None)
        and not ((view, n) in FILLED and shown | None == kind)
    }
    assert differ == {}
