"""The state table DAL on moto's DynamoDB, with the table defined as template.yaml defines it."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from autopilot.dal import state_table
from autopilot.dal.state_table import StateTable
from autopilot.errors import ClusterBusyError, ClusterNameTakenError, InvalidPageTokenError
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    new_operation_id,
)
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.samples.state_table import create_state_table

TABLE = "state"


@pytest.fixture
def store() -> Iterator[StateTable]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        yield StateTable(TABLE, client=client)


def operation(op_id: str, name: str = "c1", kind: OperationType = OperationType.CREATE_CLUSTER) -> Operation:
    return Operation(
        operation_id=op_id,
        operation_type=kind,
        cluster_name=name,
        status=OperationStatus.RUNNING,
        created_at=f"2025-11-21T14:00:0{op_id[-1]}.000Z",
        updated_at="2025-11-21T14:00:00.000Z",
        requested_by="arn:aws:iam::123456789012:user/ann",
    )


def cluster(name: str = "c1", status: ClusterStatus = ClusterStatus.CREATING, op_id: str = "op-1") -> Cluster:
    return Cluster(
        cluster_name=name,
        status=status,
        created_at="2025-11-21T14:00:00.000Z",
        updated_at="2025-11-21T14:00:00.000Z",
        last_operation_id=op_id,
        owner="ann",
    )


def test_start_create_registers_cluster_operation_and_history(store: StateTable) -> None:
    store.start_create(cluster(), operation("op-1"))

    assert store.get_cluster("c1") == cluster()
    assert store.get_operation("op-1") == operation("op-1")
    [entry] = store.list_history("c1")
    assert (entry.operation_id, entry.operation_type, entry.requested_by) == (
        "op-1",
        OperationType.CREATE_CLUSTER,
        "arn:aws:iam::123456789012:user/ann",
    )


def test_a_live_name_cannot_be_taken_twice(store: StateTable) -> None:
    store.start_create(cluster(), operation("op-1"))

    with pytest.raises(ClusterNameTakenError):
        store.start_create(cluster(op_id="op-2"), operation("op-2"))
    assert store.get_operation("op-2") is None  # nothing half-written


@pytest.mark.parametrize("gone", [ClusterStatus.DELETED, ClusterStatus.CREATE_FAILED])
def test_the_name_of_a_gone_cluster_can_be_reused(store: StateTable, gone: ClusterStatus) -> None:
    store.start_create(cluster(status=gone), operation("op-1"))

    store.start_create(cluster(op_id="op-2"), operation("op-2"))

    assert store.get_cluster("c1").last_operation_id == "op-2"  # type: ignore[union-attr]
    assert [h.operation_id for h in store.list_history("c1")] == ["op-2", "op-1"]


def test_start_delete_needs_a_settled_cluster(store: StateTable) -> None:
    store.start_create(cluster(), operation("op-1"))
    deleting = cluster(status=ClusterStatus.DELETING, op_id="op-2")

    with pytest.raises(ClusterBusyError):
        store.start_delete(deleting, operation("op-2", kind=OperationType.DELETE_CLUSTER), adopt=False)

    store.fail_operation("op-1", "c1", ClusterStatus.CREATE_FAILED, OperationError(error="E", cause="C"))
    store.start_delete(deleting, operation("op-2", kind=OperationType.DELETE_CLUSTER), adopt=False)
    assert store.get_cluster("c1").status is ClusterStatus.DELETING  # type: ignore[union-attr]


def test_adopting_an_unregistered_cluster_registers_it(store: StateTable) -> None:
    adopted = cluster("outside", ClusterStatus.DELETING, "op-3")

    store.start_delete(adopted, operation("op-3", "outside", OperationType.DELETE_CLUSTER), adopt=True)

    assert store.get_cluster("outside") == adopted
    with pytest.raises(ClusterBusyError):
        store.start_delete(adopted, operation("op-4", "outside", OperationType.DELETE_CLUSTER), adopt=True)


def test_fail_operation_records_the_cause(store: StateTable) -> None:
    store.start_create(cluster(), operation("op-1"))

    store.fail_operation(
        "op-1", "c1", ClusterStatus.CREATE_FAILED, OperationError(error="States.X", cause="why")
    )

    failed = store.get_operation("op-1")
    assert failed is not None
    assert failed.status is OperationStatus.FAILED
    assert failed.error == OperationError(error="States.X", cause="why")
    assert store.get_cluster("c1").status is ClusterStatus.CREATE_FAILED  # type: ignore[union-attr]


def test_execution_arn_and_workflow_written_fields_read_back(store: StateTable) -> None:
    store.start_create(cluster(), operation("op-1"))
    store.set_execution_arn("op-1", "arn:aws:states:us-east-1:123456789012:execution:m:op-1")
    # what the Cleanup workflow writes: leftovers as JSON text, steps as a list of maps
    store._ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "OPERATION#op-1"}, "sk": {"S": "OPERATION#op-1"}},
        UpdateExpression="SET leftovers = :l, steps = :s",
        ExpressionAttributeValues={
            ":l": {"S": '["arn:aws:s3:::bucket"]'},
            ":s": {
                "L": [{"M": {"name": {"S": "Delete Cluster"}, "enteredAt": {"S": "2025-11-21T14:00:01Z"}}}]
            },
        },
    )

    read = store.get_operation("op-1")

    assert read is not None
    assert read.execution_arn == "arn:aws:states:us-east-1:123456789012:execution:m:op-1"
    assert read.leftovers == ["arn:aws:s3:::bucket"]
    assert [s.name for s in read.steps] == ["Delete Cluster"]


def test_list_clusters_pages_in_name_order(store: StateTable) -> None:
    for index, name in enumerate(("charlie", "alpha", "bravo")):
        store.start_create(cluster(name, op_id=f"op-{index}"), operation(f"op-{index}", name))

    first = store.list_clusters(limit=2)
    second = store.list_clusters(limit=2, next_token=first.next_token)

    assert [c.cluster_name for c in first.items + second.items] == ["alpha", "bravo", "charlie"]
    assert second.next_token is None


def _put_registered(store: StateTable, name: str, status: ClusterStatus) -> None:
    item = state_table._cluster_item(cluster(name, status=status))
    store._ddb.put_item(TableName=TABLE, Item=item)


def test_live_clusters_among_many_deleted_ones_come_in_full_pages(store: StateTable) -> None:
    # 7 live clusters spread among 230 deleted ones: more than one DynamoDB read batch of deleted
    # clusters sits between live ones, and the last live one is followed only by deleted ones.
    live = {f"c{n:03d}" for n in (0, 5, 120, 121, 122, 190, 200)}
    for n in range(237):
        name = f"c{n:03d}"
        _put_registered(store, name, ClusterStatus.ACTIVE if name in live else ClusterStatus.DELETED)

    pages, token = [], None
    while True:
        page = store.list_clusters(limit=3, next_token=token)
        pages.append([c.cluster_name for c in page.items])
        token = page.next_token
        if token is None:
            break

    assert pages == [["c000", "c005", "c120"], ["c121", "c122", "c190"], ["c200"]]


def test_a_page_that_ends_the_live_clusters_carries_no_token(store: StateTable) -> None:
    for n, status in enumerate([ClusterStatus.ACTIVE] * 2 + [ClusterStatus.DELETED] * 3):
        _put_registered(store, f"c{n}", status)

    page = store.list_clusters(limit=2)
    everything = store.list_clusters(limit=2, include_deleted=True)

    assert [c.cluster_name for c in page.items] == ["c0", "c1"]
    assert page.next_token is None
    assert everything.next_token is not None
    rest = store.list_clusters(limit=10, next_token=everything.next_token, include_deleted=True)
    assert [c.cluster_name for c in rest.items] == ["c2", "c3", "c4"]


def test_a_page_token_names_a_cluster_to_start_after(store: StateTable) -> None:
    for name in ("alpha", "bravo", "charlie"):
        _put_registered(store, name, ClusterStatus.ACTIVE)
    forged = base64.urlsafe_b64encode(json.dumps({"after": "b"}).encode()).decode()

    page = store.list_clusters(next_token=forged)

    assert [c.cluster_name for c in page.items] == ["bravo", "charlie"]


@pytest.mark.parametrize(
    "token",
    [
        "***",  # not base64
        "WzFd",  # a list
        "eyJwayI6IDF9",  # {"pk": 1}: a key, not a token
        base64.urlsafe_b64encode(b'{"after": "-bad-"}').decode(),  # not a cluster name
        base64.urlsafe_b64encode(json.dumps({"after": "a" * 64}).encode()).decode(),  # too long
        base64.urlsafe_b64encode(b'{"after": "a", "pk": "CLUSTER#a"}').decode(),  # extra members
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),  # not UTF-8
        "é",  # not ASCII
    ],
)
def test_a_foreign_page_token_is_rejected(store: StateTable, token: str) -> None:
    with pytest.raises(InvalidPageTokenError):
        store.list_clusters(next_token=token)


def test_unknown_items_read_as_none(store: StateTable) -> None:
    assert store.get_cluster("nope") is None
    assert store.get_operation("nope") is None


def test_other_dynamodb_errors_propagate(store: StateTable) -> None:
    broken = StateTable("no-such-table", client=store._ddb)

    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        broken.start_create(cluster(), operation("op-1"))
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        broken.start_delete(cluster(), operation("op-1"), adopt=True)


def test_operation_ids_sort_by_time_and_are_execution_names() -> None:
    early = new_operation_id(datetime(2025, 1, 1, tzinfo=UTC))
    late = new_operation_id(datetime(2025, 1, 2, tzinfo=UTC))

    assert early < late
    assert len(early) <= 80
    assert early.replace("-", "").isalnum()


def test_the_default_client_is_the_shared_lazy_one(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = object()
    monkeypatch.setattr(
        state_table.aws, "client", lambda service: sentinel if service == "dynamodb" else None
    )

    assert StateTable("t")._ddb is sentinel
