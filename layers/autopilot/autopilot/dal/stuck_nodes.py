"""Since when the sweep has seen a node not Running: ``notRunningSince`` on the node item.

SageMaker says what a node's status is, not since when, so the sweep keeps the time it first saw the
node out of Running (``if_not_exists``: later sweeps keep the first sighting) and removes it once the
node is Running again. The node item is dal/healing.py's (kind ``NODE``); these two attributes are the
sweep's alone, and the item's identifying attributes are written as record_health writes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.healing import NODE_KIND, NODE_PREFIX, node_key
from autopilot.dal.table import cluster_key, from_attributes, is_condition_failure, key_attributes, time_value

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class StuckNodes:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def not_running_since(self, cluster_name: str) -> dict[str, datetime]:
        """node id -> when the sweep first saw it not Running, for the nodes it still sees so."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :node)",
            "FilterExpression": "attribute_exists(notRunningSince)",
            "ProjectionExpression": "nodeId, notRunningSince",
            "ExpressionAttributeValues": {
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":node": {"S": NODE_PREFIX},
            },
        }
        found: dict[str, datetime] = {}
        while True:
            page = self.dynamodb.query(**kwargs)
            for item in page.get("Items", []):
                plain = from_attributes(item)
                found[str(plain["nodeId"])] = datetime.fromisoformat(str(plain["notRunningSince"]))
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def mark_not_running(self, cluster_name: str, node_id: str, *, status: str, at: datetime) -> datetime:
        """Note the node out of Running (``status``) unless it is noted already; since when."""
        response = self.dynamodb.update_item(
            TableName=self._table,
            Key=key_attributes(node_key(cluster_name, node_id)),
            UpdateExpression=(
                "SET #kind = :kind, clusterName = :cluster, nodeId = :node, notRunningStatus = :status, "
                "notRunningSince = if_not_exists(notRunningSince, :at)"
            ),
            ExpressionAttributeNames={"#kind": "kind"},
            ExpressionAttributeValues={
                ":kind": {"S": NODE_KIND},
                ":cluster": {"S": cluster_name},
                ":node": {"S": node_id},
                ":status": {"S": status},
                ":at": time_value(at),
            },
            ReturnValues="ALL_NEW",
        )
        return datetime.fromisoformat(response["Attributes"]["notRunningSince"]["S"])

    def clear(self, cluster_name: str, node_id: str) -> None:
        """The node is Running again."""
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=key_attributes(node_key(cluster_name, node_id)),
                UpdateExpression="REMOVE notRunningSince, notRunningStatus",
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
