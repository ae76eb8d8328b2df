"""Healing's items on moto's DynamoDB (the table as template.yaml defines it): the claim exactly once
under duplicates, health reports in order, the breaker's version guard, pause/resume, and the lease
the ReplaceNode workflow takes with the condition healing-design.md gives it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from autopilot.dal.healing import HealingTable, healing_key, node_key
from autopilot.dal.state_table import StateTable
from autopilot.dal.table import operation_key
from autopilot.models.records import (
    ActionResult,
    Fault,
    NodeAction,
    NodeHealth,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    RepairActor,
    RepairTrigger,
    iso,
)
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.samples.state_table import create_state_table

TABLE = "state"
CLUSTER = "c1"
NODE = "i-0123456789abcdef0"
T1 = datetime(2026, 11, 22, 10, tzinfo=UTC)
T2 = datetime(2026, 11, 22, 10, 5, tzinfo=UTC)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        yield client


@pytest.fixture
def table(ddb: Any) -> HealingTable:
    return HealingTable(TABLE, dynamodb=ddb)


def repair(op_id: str, detected_at: datetime = T1, node: str = NODE) -> Operation:
    return Operation(
        operation_id=op_id,
        operation_type=OperationType.REPLACE_NODE,
        cluster_name=CLUSTER,
        status=OperationStatus.RUNNING,
        created_at=detected_at,
        updated_at=detected_at,
        node_id=node,
        trigger=RepairTrigger.EVENT,
        fault=Fault(fault_type="NvidiaErrorTerminate", repair_action="None", detected_at=detected_at),
        actor=RepairActor.AUTOPILOT,
        actions=[],
    )


def end_repair(ddb: Any, node: str = NODE) -> None:
    """What the workflow does at its end: the node's openRepair removed."""
    ddb.update_item(
        TableName=TABLE,
        Key={k: {"S": v} for k, v in node_key(CLUSTER, node).items()},
        UpdateExpression="REMOVE openRepair",
    )


def test_a_fault_is_claimed_once_however_often_it_is_delivered(table: HealingTable, ddb: Any) -> None:
    assert table.claim_repair(repair("op-1"), fault_at=T1, instance_group="workers")
    assert not table.claim_repair(repair("op-2"), fault_at=T1)  # duplicate while the repair runs
    end_repair(ddb)
    assert not table.claim_repair(repair("op-3"), fault_at=T1)  # duplicate after it ended

    store = StateTable(TABLE, client=ddb)
    assert store.get_operation("op-1") == repair("op-1")
    assert store.get_operation("op-2") is None
    assert store.get_operation("op-3") is None
    assert [e.operation_id for e in store.list_history(CLUSTER)] == ["op-1"]
    node = table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.open_repair, node.last_fault_at, node.instance_group) == (None, T1, "workers")


def test_a_later_fault_is_claimed_only_when_no_repair_is_open(table: HealingTable, ddb: Any) -> None:
    assert table.claim_repair(repair("op-1"), fault_at=T1)
    assert not table.claim_repair(repair("op-2", T2), fault_at=T2)
    end_repair(ddb)
    assert table.claim_repair(repair("op-3", T2), fault_at=T2)
    node = table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.open_repair, node.last_fault_at) == ("op-3", T2)
    # ReplaceNode operations are listed in the cluster's history, newest first
    assert [e.operation_id for e in StateTable(TABLE, client=ddb).list_history(CLUSTER)] == ["op-3", "op-1"]


def test_health_reports_older_than_the_one_held_are_refused(table: HealingTable) -> None:
    held = table.record_health(CLUSTER, NODE, NodeHealth.UNHEALTHY, reason="fault", at=T2, instance_group="w")
    assert held is not None
    assert (held.health, held.health_since, held.instance_group) == (NodeHealth.UNHEALTHY, T2, "w")

    assert table.record_health(CLUSTER, NODE, NodeHealth.HEALTHY, reason=None, at=T1) is None
    # the same report again is written again (a message delivered twice goes on to the claim)
    again = table.record_health(CLUSTER, NODE, NodeHealth.UNHEALTHY, reason="fault", at=T2)
    assert again is not None
    assert again.instance_group == "w"
    healed = table.record_health(
        CLUSTER, NODE, NodeHealth.HEALTHY, reason=None, at=datetime(2026, 11, 22, 11, tzinfo=UTC)
    )
    assert healed is not None
    assert (healed.health, healed.health_reason) == (NodeHealth.HEALTHY, None)
    assert [n.node_id for n in table.list_nodes(CLUSTER)] == [NODE]


def test_an_unstarted_repair_fails_and_gives_the_fault_back(table: HealingTable, ddb: Any) -> None:
    assert table.claim_repair(repair("op-1"), fault_at=T1)
    end_repair(ddb)
    assert table.claim_repair(repair("op-2", T2), fault_at=T2)

    error = OperationError(error="StepFunctions.StateMachineDoesNotExist", cause="gone")
    table.fail_unstarted_repair(repair("op-2", T2), error, previous_fault_at=T1, now=T2)

    failed = StateTable(TABLE, client=ddb).get_operation("op-2")
    assert failed is not None
    assert (failed.status, failed.error) == (OperationStatus.FAILED, error)
    node = table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.open_repair, node.last_fault_at) == (None, T1)
    assert table.claim_repair(repair("op-3", T2), fault_at=T2)  # the redelivered event claims it again


def test_the_breaker_writes_only_over_the_version_it_read(table: HealingTable) -> None:
    assert table.get_healing(CLUSTER).version == 0
    assert table.write_breaker(CLUSTER, {"i-1": T1}, expected_version=0, now=T1)
    assert not table.write_breaker(CLUSTER, {"i-2": T1}, expected_version=0, now=T1)  # lost the race
    assert table.write_breaker(
        CLUSTER, {"i-1": T1, "i-2": T2}, expected_version=1, trip_reason="2 of 4", now=T2
    )

    state = table.get_healing(CLUSTER)
    assert (state.version, state.unhealthy_reports) == (2, {"i-1": T1, "i-2": T2})
    assert (state.paused, state.paused_by, state.paused_reason, state.tripped_at) == (
        True,
        "breaker",
        "2 of 4",
        T2,
    )
    assert not table.pause(CLUSTER, by="arn:aws:iam::123456789012:user/ann", reason="again", now=T2)


def test_resume_clears_the_reports_and_outdates_a_concurrent_breaker_write(table: HealingTable) -> None:
    assert not table.resume(CLUSTER, by="ann", now=T1)  # never paused
    assert table.write_breaker(CLUSTER, {"i-1": T1}, expected_version=0, trip_reason="r", now=T1)
    read = table.get_healing(CLUSTER)

    assert table.resume(CLUSTER, by="arn:aws:iam::123456789012:user/ann", now=T2)
    assert not table.write_breaker(CLUSTER, {"i-1": T1, "i-2": T2}, expected_version=read.version, now=T2)

    state = table.get_healing(CLUSTER)
    assert (state.paused, state.unhealthy_reports, state.resumed_at) == (False, {}, T2)
    assert state.resumed_by == "arn:aws:iam::123456789012:user/ann"
    assert table.pause(CLUSTER, by="arn:aws:iam::123456789012:user/bob", reason="maintenance", now=T2)
    assert table.get_healing(CLUSTER).paused_by == "arn:aws:iam::123456789012:user/bob"


def acquire(ddb: Any, op_id: str, cap: int) -> bool:
    """The workflow's lease acquire, with healing-design.md's condition."""
    try:
        ddb.update_item(
            TableName=TABLE,
            Key={k: {"S": v} for k, v in healing_key(CLUSTER).items()},
            UpdateExpression="ADD leaseHolders :op",
            ConditionExpression=(
                "(attribute_not_exists(leaseHolders) OR size(leaseHolders) < :cap "
                "OR contains(leaseHolders, :opId)) AND (attribute_not_exists(paused) OR paused = :false)"
            ),
            ExpressionAttributeValues={
                ":op": {"SS": [op_id]},
                ":opId": {"S": op_id},
                ":cap": {"N": str(cap)},
                ":false": {"BOOL": False},
            },
        )
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def test_leases_cap_repairs_and_the_sweep_prunes_dead_holders(table: HealingTable, ddb: Any) -> None:
    assert acquire(ddb, "op-1", cap=2)
    assert acquire(ddb, "op-1", cap=2)  # a retried acquire of a holder
    assert acquire(ddb, "op-2", cap=2)
    assert not acquire(ddb, "op-3", cap=2)
    assert table.get_healing(CLUSTER).lease_holders == {"op-1", "op-2"}

    # op-1's execution died without its release; op-2 still runs
    for op_id, status in (("op-1", OperationStatus.FAILED), ("op-2", OperationStatus.RUNNING)):
        assert table.claim_repair(repair(op_id, node=f"i-{op_id}"), fault_at=T1)
        if status is not OperationStatus.RUNNING:
            ddb.update_item(
                TableName=TABLE,
                Key={k: {"S": v} for k, v in operation_key(op_id).items()},
                UpdateExpression="SET #s = :s",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":s": {"S": status.value}},
            )
    assert table.prune_lease_holders(CLUSTER) == {"op-1"}
    assert table.get_healing(CLUSTER).lease_holders == {"op-2"}
    assert acquire(ddb, "op-3", cap=2)

    assert table.pause(CLUSTER, by="breaker-test", reason="r", now=T1)
    assert not acquire(ddb, "op-4", cap=5)  # paused: no new lease


def test_actions_the_workflow_appends_read_back_as_repair_actions(table: HealingTable, ddb: Any) -> None:
    assert table.claim_repair(repair("op-1"), fault_at=T1)
    ddb.update_item(
        TableName=TABLE,
        Key={k: {"S": v} for k, v in operation_key("op-1").items()},
        UpdateExpression="SET actions = list_append(actions, :a), successorNodeId = :s",
        ExpressionAttributeValues={
            ":a": {
                "L": [
                    {"M": {"action": {"S": "reboot"}, "at": {"S": iso(T1)}, "result": {"S": "timed-out"}}},
                    {
                        "M": {
                            "action": {"S": "replace"},
                            "at": {"S": iso(T2)},
                            "result": {"S": "succeeded"},
                            "successorNodeId": {"S": "i-new"},
                        }
                    },
                ]
            },
            ":s": {"S": "i-new"},
        },
    )
    operation = table.get_operation("op-1")
    assert operation is not None
    assert operation.actions is not None
    assert [(a.action, a.result) for a in operation.actions] == [
        (NodeAction.REBOOT, ActionResult.TIMED_OUT),
        (NodeAction.REPLACE, ActionResult.SUCCEEDED),
    ]
    assert (operation.actions[1].successor_node_id, operation.successor_node_id) == ("i-new", "i-new")


def test_the_sweep_frees_nodes_whose_repair_died_without_ending(table: HealingTable, ddb: Any) -> None:
    assert table.claim_repair(repair("op-1", node="i-dead"), fault_at=T1)
    assert table.claim_repair(repair("op-2", node="i-alive"), fault_at=T1)
    # op-1's execution died: RecordOutcome recorded it FAILED, its openRepair stayed
    ddb.update_item(
        TableName=TABLE,
        Key={k: {"S": v} for k, v in operation_key("op-1").items()},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": OperationStatus.FAILED.value}},
    )
    assert not table.claim_repair(repair("op-3", T2, node="i-dead"), fault_at=T2)

    assert table.prune_open_repairs(CLUSTER) == {"i-dead"}
    assert table.claim_repair(repair("op-3", T2, node="i-dead"), fault_at=T2)
    alive = table.get_node(CLUSTER, "i-alive")
    assert alive is not None
    assert alive.open_repair == "op-2"
    assert not table.release_node(CLUSTER, "i-alive", "op-1")  # only the holder releases
