"""Healing's items in the state table: one per node Autopilot heard of, one per cluster for the breaker,
the pause switch and the repair leases (docs/operations.md, "State table"; healing-design.md).

- Node item ``CLUSTER#<name>`` / ``NODE#<nodeId>`` (kind ``NODE``): the latest health report, the repair
  in flight (``openRepair``) and the fault last acted on (``lastFaultAt``).
- Healing item ``CLUSTER#<name>`` / ``HEALING`` (kind ``HEALING``): ``paused`` and why, the breaker's
  ``unhealthyReports`` within its window, ``leaseHolders`` (operation ids holding a repair slot; the
  ReplaceNode workflow adds and deletes itself with ``dynamodb:updateItem``) and ``version``, which every
  breaker, pause and resume write bumps so the breaker's read-modify-write never loses a report.

A repair is claimed by one transaction (``claim_repair``): the node's conditional update, the ReplaceNode
operation and its history entry. A duplicate event, the sweep and the API meet the same condition, so a
fault is repaired exactly once.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.state_table import StateTable, fail_running_write, history_put, operation_put
from autopilot.dal.table import (
    attribute_value,
    cluster_key,
    from_attributes,
    from_item,
    is_condition_failure,
    key_attributes,
    time_value,
)
from autopilot.models.records import (
    Cluster,
    HealingState,
    NodeHealth,
    NodeRecord,
    Operation,
    OperationError,
    OperationStatus,
    iso,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

NODE_KIND = "NODE"
HEALING_KIND = "HEALING"
NODE_PREFIX = "NODE#"
HEALING_SK = "HEALING"
# The healing item's pausedBy when the breaker paused repairs (else an operator's principal ARN).
BREAKER = "breaker"


def node_key(cluster_name: str, node_id: str) -> dict[str, str]:
    return {"pk": cluster_key(cluster_name)["pk"], "sk": f"{NODE_PREFIX}{node_id}"}


def healing_key(cluster_name: str) -> dict[str, str]:
    return {"pk": cluster_key(cluster_name)["pk"], "sk": HEALING_SK}


class HealingTable:
    """Node and healing items in DynamoDB (the state table)."""

    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    # --- node items ---------------------------------------------------------------------------

    def record_health(
        self,
        cluster_name: str,
        node_id: str,
        health: NodeHealth,
        *,
        reason: str | None,
        at: datetime,
        instance_group: str | None = None,
    ) -> NodeRecord | None:
        """Hold this health report unless a later one is held; the node item after it, or None.

        A report as old as the one held is written again (not refused): a message processed halfway
        and delivered again must go on to its claim, which is where a duplicate stops.
        """
        values: dict[str, Any] = {
            ":kind": {"S": NODE_KIND},
            ":cluster": {"S": cluster_name},
            ":node": {"S": node_id},
            ":health": {"S": health.value},
            ":at": time_value(at),
        }
        sets = [
            "#kind = :kind",
            "clusterName = :cluster",
            "nodeId = :node",
            "#health = :health",
            "healthSince = :at",
        ]
        if instance_group is not None:
            sets.append("instanceGroup = :group")
            values[":group"] = {"S": instance_group}
        if reason is not None:
            sets.append("healthReason = :reason")
            values[":reason"] = {"S": reason}
        update = "SET " + ", ".join(sets) + ("" if reason is not None else " REMOVE healthReason")
        try:
            response = self.dynamodb.update_item(
                TableName=self._table,
                Key=key_attributes(node_key(cluster_name, node_id)),
                UpdateExpression=update,
                ConditionExpression="attribute_not_exists(healthSince) OR healthSince <= :at",
                ExpressionAttributeNames={"#kind": "kind", "#health": "health"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            raise
        return from_item(NodeRecord, response["Attributes"])

    def _update_if(self, **request: Any) -> bool:
        """UpdateItem with its condition; False (nothing written) when the condition does not hold."""
        try:
            self.dynamodb.update_item(**request)
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def get_node(self, cluster_name: str, node_id: str) -> NodeRecord | None:
        item = self.dynamodb.get_item(
            TableName=self._table, Key=key_attributes(node_key(cluster_name, node_id)), ConsistentRead=True
        ).get("Item")
        return from_item(NodeRecord, item) if item else None

    def list_nodes(self, cluster_name: str) -> list[NodeRecord]:
        """Every node item of the cluster, in node id order."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :node)",
            "ExpressionAttributeValues": {
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":node": {"S": NODE_PREFIX},
            },
            "ConsistentRead": True,
        }
        found: list[NodeRecord] = []
        while True:
            page = self.dynamodb.query(**kwargs)
            found += [from_item(NodeRecord, i) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # --- the claim ----------------------------------------------------------------------------

    def claim_repair(
        self, operation: Operation, *, fault_at: datetime, instance_group: str | None = None
    ) -> bool:
        """Claim the repair of ``operation.node_id`` for the fault reported at ``fault_at``, atomically
        with the ReplaceNode operation and its history entry; False (nothing written) when a repair is
        open on the node or a fault this recent was claimed already.
        """
        if operation.node_id is None:
            raise ValueError("a repair operation names its node")
        values: dict[str, Any] = {
            ":kind": {"S": NODE_KIND},
            ":cluster": {"S": operation.cluster_name},
            ":node": {"S": operation.node_id},
            ":op": {"S": operation.operation_id},
            ":at": time_value(fault_at),
        }
        update = (
            "SET #kind = :kind, clusterName = :cluster, nodeId = :node, openRepair = :op, lastFaultAt = :at"
        )
        if instance_group is not None:
            update += ", instanceGroup = :group"
            values[":group"] = {"S": instance_group}
        node_write: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self._table,
                "Key": key_attributes(node_key(operation.cluster_name, operation.node_id)),
                "UpdateExpression": update,
                "ConditionExpression": (
                    "attribute_not_exists(openRepair) AND "
                    "(attribute_not_exists(lastFaultAt) OR lastFaultAt < :at)"
                ),
                "ExpressionAttributeNames": {"#kind": "kind"},
                "ExpressionAttributeValues": values,
            }
        }
        try:
            self.dynamodb.transact_write_items(
                TransactItems=[
                    node_write,
                    operation_put(self._table, operation),
                    history_put(self._table, operation),
                ]
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def set_execution_arn(self, operation_id: str, execution_arn: str) -> None:
        StateTable(self._table, client=self.dynamodb).set_execution_arn(operation_id, execution_arn)

    def get_operation(self, operation_id: str) -> Operation | None:
        return StateTable(self._table, client=self.dynamodb).get_operation(operation_id)

    def get_cluster(self, cluster_name: str) -> Cluster | None:
        return StateTable(self._table, client=self.dynamodb).get_cluster(cluster_name)

    def fail_unstarted_repair(
        self,
        operation: Operation,
        error: OperationError,
        *,
        previous_fault_at: datetime | None,
        now: datetime,
    ) -> None:
        """Record FAILED for a repair whose workflow did not start, and give the node back: its claim
        is undone (``openRepair`` removed, ``lastFaultAt`` as before), so a retried delivery of the same
        event, or the sweep, claims the fault again.
        """
        if operation.node_id is None:
            raise ValueError("a repair operation names its node")
        node_values: dict[str, Any] = {":op": {"S": operation.operation_id}}
        node_update = "REMOVE openRepair, lastFaultAt"
        if previous_fault_at is not None:
            node_update = "SET lastFaultAt = :previous REMOVE openRepair"
            node_values[":previous"] = time_value(previous_fault_at)
        self.dynamodb.transact_write_items(
            TransactItems=[
                fail_running_write(self._table, operation.operation_id, error, now),
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": key_attributes(node_key(operation.cluster_name, operation.node_id)),
                        "UpdateExpression": node_update,
                        "ConditionExpression": "openRepair = :op",
                        "ExpressionAttributeValues": node_values,
                    }
                },
            ]
        )

    def release_node(self, cluster_name: str, node_id: str, operation_id: str) -> bool:
        """Remove the node's ``openRepair`` if ``operation_id`` still holds it (the workflow's own end,
        done for a repair whose execution died); False when another repair, or none, holds it."""
        return self._update_if(
            TableName=self._table,
            Key=key_attributes(node_key(cluster_name, node_id)),
            UpdateExpression="REMOVE openRepair",
            ConditionExpression="openRepair = :op",
            ExpressionAttributeValues={":op": {"S": operation_id}},
        )

    def prune_open_repairs(self, cluster_name: str) -> set[str]:
        """Free the nodes whose open repair is no longer RUNNING (an execution that died, recorded
        FAILED by RecordOutcome or the reconciler, never removed its ``openRepair``, and the node could
        never be claimed again); the node ids freed. For the sweep.
        """
        freed: set[str] = set()
        for node in self.list_nodes(cluster_name):
            if node.open_repair is None:
                continue
            operation = self.get_operation(node.open_repair)
            if operation is not None and operation.status is OperationStatus.RUNNING:
                continue
            if self.release_node(cluster_name, node.node_id, node.open_repair):
                freed.add(node.node_id)
        return freed

    # --- the healing item ---------------------------------------------------------------------

    def get_healing(self, cluster_name: str) -> HealingState:
        """The cluster's healing item; an unpaused one at version 0 when none was written yet."""
        item = self.dynamodb.get_item(
            TableName=self._table, Key=key_attributes(healing_key(cluster_name)), ConsistentRead=True
        ).get("Item")
        if not item:
            return HealingState(cluster_name=cluster_name)
        return HealingState.model_validate({"clusterName": cluster_name, **from_attributes(item)})

    def write_breaker(
        self,
        cluster_name: str,
        reports: dict[str, datetime],
        *,
        expected_version: int,
        trip_reason: str | None = None,
        now: datetime,
    ) -> bool:
        """Replace the breaker's reports (and with ``trip_reason`` pause repairs, pausedBy "breaker")
        if the item is still at ``expected_version``; False when another write came first.
        """
        names = {"#kind": "kind", "#version": "version"}
        values: dict[str, Any] = {
            ":kind": {"S": HEALING_KIND},
            ":cluster": {"S": cluster_name},
            ":reports": attribute_value({node: iso(at) for node, at in reports.items()}),
            ":next": {"N": str(expected_version + 1)},
        }
        update = "SET #kind = :kind, clusterName = :cluster, unhealthyReports = :reports, #version = :next"
        if trip_reason is not None:
            update += (
                ", paused = :true, pausedBy = :breaker, pausedReason = :reason, "
                "pausedAt = :now, trippedAt = :now, tripAlertPending = :true"
            )
            values |= {
                ":true": {"BOOL": True},
                ":breaker": {"S": BREAKER},
                ":reason": {"S": trip_reason},
                ":now": time_value(now),
            }
        if expected_version == 0:
            condition = "attribute_not_exists(#version)"
        else:
            condition = "#version = :expected"
            values[":expected"] = {"N": str(expected_version)}
        return self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def claim_trip_alert(self, cluster_name: str) -> bool:
        """Take the breaker's pending alert to send it: one sender however many reports see it pending;
        False when none is pending."""
        return self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression="REMOVE tripAlertPending",
            ConditionExpression="tripAlertPending = :true",
            ExpressionAttributeValues={":true": {"BOOL": True}},
        )

    def restore_trip_alert(self, cluster_name: str) -> None:
        """The claimed alert could not be sent: pending again (a redelivered report sends it), unless
        the breaker's pause ended meanwhile."""
        self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression="SET tripAlertPending = :true",
            ConditionExpression="paused = :true AND pausedBy = :breaker",
            ExpressionAttributeValues={":true": {"BOOL": True}, ":breaker": {"S": BREAKER}},
        )

    def pause(self, cluster_name: str, *, by: str, reason: str, now: datetime) -> bool:
        """Pause automatic repairs (an operator); False when they were paused already."""
        return self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression=(
                "SET #kind = :kind, clusterName = :cluster, paused = :true, pausedBy = :by, "
                "pausedReason = :reason, pausedAt = :now ADD #version :one"
            ),
            ConditionExpression="attribute_not_exists(paused) OR paused = :false",
            ExpressionAttributeNames={"#kind": "kind", "#version": "version"},
            ExpressionAttributeValues={
                ":kind": {"S": HEALING_KIND},
                ":cluster": {"S": cluster_name},
                ":true": {"BOOL": True},
                ":false": {"BOOL": False},
                ":by": {"S": by},
                ":reason": {"S": reason},
                ":now": time_value(now),
                ":one": {"N": "1"},
            },
        )

    def resume(self, cluster_name: str, *, by: str, now: datetime) -> bool:
        """Resume automatic repairs and forget the breaker's reports; False when they were not paused."""
        return self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression=(
                "SET paused = :false, resumedBy = :by, resumedAt = :now, unhealthyReports = :none "
                "ADD #version :one"
            ),
            ConditionExpression="paused = :true",
            ExpressionAttributeNames={"#version": "version"},
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":false": {"BOOL": False},
                ":by": {"S": by},
                ":now": time_value(now),
                ":none": {"M": {}},
                ":one": {"N": "1"},
            },
        )

    def release_leases(self, cluster_name: str, operation_ids: set[str]) -> None:
        """Take these operations off the repair slots (the workflow's own release, done for it)."""
        if not operation_ids:
            return
        self._update_if(
            TableName=self._table,
            Key=key_attributes(healing_key(cluster_name)),
            UpdateExpression="DELETE leaseHolders :ops",
            # no healing item: nobody holds a slot (and none is made here)
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":ops": {"SS": sorted(operation_ids)}},
        )

    def prune_lease_holders(self, cluster_name: str) -> set[str]:
        """Remove the lease holders whose operation is no longer RUNNING (a workflow that died without
        its release would hold a slot for ever); the operation ids removed. For the sweep.
        """
        holders = self.get_healing(cluster_name).lease_holders
        dead: set[str] = set()
        for operation_id in holders:
            operation = self.get_operation(operation_id)
            if operation is None or operation.status is not OperationStatus.RUNNING:
                dead.add(operation_id)
        self.release_leases(cluster_name, dead)
        return dead
