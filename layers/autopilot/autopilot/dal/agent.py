"""The Slurm agent's items in the state table (docs/operations.md, "State table"):

- ``CLUSTER#<name>`` / ``AGENT`` (kind ``AGENT``): the latest accepted report — ``lastSeen`` on the
  product clock, ``agentVersion``, ``nodes`` (Slurm node name → its view).
- ``CLUSTER#<name>`` / ``AGENTCMD#<commandId>``: a command for the cluster's agent with the task token
  of the workflow state waiting on it, its ``deadline``, ``status`` pending | done and ``expiresAt`` (TTL).

Commands live under their cluster's key, so a report can only ever see and complete its own cluster's.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.table import (
    cluster_key,
    from_item,
    is_condition_failure,
    key_attributes,
    time_value,
    to_attributes,
)
from autopilot.models.agent import AgentRecord, CommandStatus, StoredCommand

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

AGENT_KIND = "AGENT"
AGENT_SK = "AGENT"
COMMAND_PREFIX = "AGENTCMD#"
# A finished or expired command stays readable this long past its deadline (then DynamoDB's TTL removes it).
COMMAND_RETENTION = timedelta(days=1)
# DynamoDB's item limit is 400 KB (attribute names and values, roughly their JSON): room kept for the rest.
MAX_ITEM_BYTES = 350_000
JOBS_KEPT_WHEN_LARGE = (16, 0)


def agent_key(cluster_name: str) -> dict[str, str]:
    return {"pk": cluster_key(cluster_name)["pk"], "sk": AGENT_SK}


def command_key(cluster_name: str, command_id: str) -> dict[str, str]:
    return {"pk": cluster_key(cluster_name)["pk"], "sk": f"{COMMAND_PREFIX}{command_id}"}


def _fitted(record: AgentRecord) -> dict[str, Any]:
    """The record as stored: within DynamoDB's 400 KB item, a report of thousands of busy nodes keeps
    each node's first jobs only, then none (the agent checks jobs itself; nothing here decides on them)."""
    item = record.model_dump(by_alias=True, mode="json", exclude_none=True)
    for keep in JOBS_KEPT_WHEN_LARGE:
        if len(json.dumps(item)) <= MAX_ITEM_BYTES:
            break
        for node in item["nodes"].values():
            node["jobs"] = node["jobs"][:keep]
    if len(json.dumps(item)) > MAX_ITEM_BYTES:
        # thousands of nodes not responding at once (~45 bytes each): without their first sightings the
        # sweep repairs none on Slurm's word, which a cluster-wide silence (the breaker's case) wants anyway
        item.pop("notRespondingSince", None)
    return item


class AgentTable:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def record_report(self, cluster_name: str, record: AgentRecord) -> None:
        self.dynamodb.put_item(
            TableName=self._table,
            Item=to_attributes({**agent_key(cluster_name), "kind": AGENT_KIND, **_fitted(record)}),
        )

    def agent(self, cluster_name: str) -> AgentRecord | None:
        item = self.dynamodb.get_item(TableName=self._table, Key=key_attributes(agent_key(cluster_name))).get(
            "Item"
        )
        return from_item(AgentRecord, item) if item else None

    def add_command(self, cluster_name: str, command: StoredCommand, *, deadline: datetime) -> bool:
        """Store the command once: a retried invoke of the same task (same commandId) changes nothing.
        Whether this call stored it."""
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item=to_attributes(
                    {
                        **command_key(cluster_name, command.command_id),
                        **command.model_dump(by_alias=True, mode="json", exclude_none=True),
                        "expiresAt": int((deadline + COMMAND_RETENTION).timestamp()),
                    }
                ),
                ConditionExpression="attribute_not_exists(sk)",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            return False
        return True

    def command(self, cluster_name: str, command_id: str) -> StoredCommand | None:
        item = self.dynamodb.get_item(
            TableName=self._table,
            Key=key_attributes(command_key(cluster_name, command_id)),
            ConsistentRead=True,
        ).get("Item")
        return from_item(StoredCommand, item) if item else None

    def pending_commands(self, cluster_name: str, *, after: datetime) -> list[StoredCommand]:
        """The cluster's commands still pending whose deadline is later than ``after``."""
        found: list[StoredCommand] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "#status = :pending AND deadline > :after",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":prefix": {"S": COMMAND_PREFIX},
                ":pending": {"S": CommandStatus.PENDING.value},
                ":after": time_value(after),
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.dynamodb.query(**kwargs)
            found += [from_item(StoredCommand, i) for i in page.get("Items", [])]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def finish_command(self, cluster_name: str, command_id: str) -> None:
        """Mark the command done: it is no longer handed to the agent."""
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=key_attributes(command_key(cluster_name, command_id)),
                UpdateExpression="SET #status = :done",
                ConditionExpression="attribute_exists(sk)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":done": {"S": CommandStatus.DONE.value}},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # removed by its TTL meanwhile: nothing left to finish
                raise
