"""The launch watcher's guards (autopilot.logic.launch_watch) on AWS's sample events, with fakes: a
report older than the scale leaves it RUNNING, a duplicate ends nothing twice, and only an Error cluster
event about an instance is a failed launch. The end to end paths are in
tests/integration/test_launch_watch.py."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from autopilot.logic.launch_watch import LaunchWatch, launch_failed, update_over
from autopilot.models.hyperpod_events import ClusterEvent, ClusterStateChangeEvent
from autopilot.models.records import Operation, OperationStatus, OperationType

from tests.samples import load_event

GROUP = "example instance group name"  # the sample state change's group (TargetCount 2)


class FakeTable:
    def __init__(self, *operations: Operation) -> None:
        self.operations = {op.operation_id: op for op in operations}
        self.ended: list[tuple[str, OperationStatus]] = []
        self.claims: set[tuple[str, str]] = set()

    def running_scales(self, cluster_name: str) -> list[Operation]:
        return [op for op in self.operations.values() if op.status is OperationStatus.RUNNING]

    def finish_scale(self, operation_id: str, *, status: OperationStatus, **_: Any) -> bool:
        operation = self.operations[operation_id]
        if operation.status is not OperationStatus.RUNNING:
            return False
        self.operations[operation_id] = operation.model_copy(update={"status": status})
        self.ended.append((operation_id, status))
        return True

    def claim_launch_failure(self, cluster_name: str, instance_id: str, *, now: datetime) -> bool:
        if (cluster_name, instance_id) in self.claims:
            return False
        self.claims.add((cluster_name, instance_id))
        return True


class FakeSageMaker:
    def list_cluster_nodes(self, **_: Any) -> dict[str, Any]:
        return {"ClusterNodeSummaries": []}


class FakeEvents:
    def __init__(self) -> None:
        self.put: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.put += Entries
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}


def watch(table: FakeTable) -> tuple[LaunchWatch, FakeEvents]:
    events = FakeEvents()
    return LaunchWatch(table, sagemaker=FakeSageMaker(), logs=object(), events=events), events  # type: ignore[arg-type]


def scale(created_at: str) -> Operation:
    return Operation(
        operation_id="op-20250428165000-0000abcd",
        operation_type=OperationType.SCALE_INSTANCE_GROUP,
        cluster_name="sample-cluster",
        status=OperationStatus.RUNNING,
        created_at=created_at,
        updated_at=created_at,
        instance_group=GROUP,
        instance_count=2,
    )


def in_service() -> ClusterStateChangeEvent:
    return ClusterStateChangeEvent.model_validate(load_event("hyperpod/cluster_state_change.json"))


def test_a_report_from_before_the_scale_does_not_end_it() -> None:
    table = FakeTable(scale("2025-04-28T17:00:00.000Z"))  # the sample is 16:59:01
    launches, events = watch(table)

    assert update_over(in_service(), launches) == []
    assert table.ended == []
    assert events.put == []


def test_the_update_over_ends_the_scale_once() -> None:
    table = FakeTable(scale("2025-04-28T16:50:00.000Z"))
    launches, events = watch(table)

    assert len(update_over(in_service(), launches)) == 1
    assert update_over(in_service(), launches) == []  # a duplicate report

    assert table.ended == [("op-20250428165000-0000abcd", OperationStatus.SUCCEEDED)]
    assert [e["DetailType"] for e in events.put] == ["Cluster Operation Succeeded"]


def test_only_an_error_about_an_instance_is_a_failed_launch() -> None:
    launches, events = watch(FakeTable())
    started = ClusterEvent.model_validate(load_event("hyperpod/cluster_event.json"))  # level absent: Info
    group_error = copy.deepcopy(load_event("hyperpod/cluster_event.json"))
    group_error["detail"]["EventDetails"].update(EventLevel="Error", ResourceType="InstanceGroup")
    del group_error["detail"]["EventDetails"]["InstanceId"]
    now = datetime(2025, 4, 28, 17, tzinfo=UTC)

    assert not launch_failed(started, launches, now=now)
    assert not launch_failed(ClusterEvent.model_validate(group_error), launches, now=now)
    assert events.put == []
