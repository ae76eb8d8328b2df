"""The state table's side of the launch watcher (autopilot.logic.launch_watch): the RUNNING
ScaleInstanceGroup operations of a cluster, their end, and the one alert of each failed launch.

A failed launch's alert is claimed with an item ``CLUSTER#<name>`` / ``LAUNCH-FAILURE#<instance-id>``
(no ``kind``: never listed), kept for ``CLAIM_RETENTION`` by the table's TTL (``expiresAt``): HyperPod
retries a Continuous cluster's launches with new instances, so an instance id fails once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.table import (
    HISTORY_PREFIX,
    attribute_value,
    cluster_key,
    from_item,
    is_condition_failure,
    key_attributes,
    operation_key,
    record_values,
    time_value,
)
from autopilot.models.records import Diagnosis, Operation, OperationError, OperationStatus, OperationType

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LAUNCH_FAILURE_PREFIX = "LAUNCH-FAILURE#"
CLAIM_RETENTION = timedelta(days=30)
# Scale operations read back from a cluster's history: one UpdateCluster runs at a time (SageMaker
# refuses another while the cluster is Updating), so a RUNNING one is among the newest few, and
# within the newest history entries (DynamoDB applies Limit before the filter).
RECENT_SCALES = 5
HISTORY_READ = 100


class LaunchWatchTable:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def running_scales(self, cluster_name: str) -> list[Operation]:
        """The cluster's newest ScaleInstanceGroup operations that are RUNNING (a Query of its history
        and a GetItem each: the function's role has no BatchGetItem)."""
        response = self.dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :history)",
            FilterExpression="operationType = :kind",
            ExpressionAttributeValues={
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":history": {"S": HISTORY_PREFIX},
                ":kind": {"S": OperationType.SCALE_INSTANCE_GROUP.value},
            },
            ScanIndexForward=False,
            Limit=HISTORY_READ,
        )
        running = []
        for entry in response.get("Items", [])[:RECENT_SCALES]:
            item = self.dynamodb.get_item(
                TableName=self._table,
                Key=key_attributes(operation_key(entry["operationId"]["S"])),
                ConsistentRead=True,
            ).get("Item")
            operation = from_item(Operation, item) if item else None
            if operation is not None and operation.status is OperationStatus.RUNNING:
                running.append(operation)
        return running

    def finish_scale(
        self,
        operation_id: str,
        *,
        status: OperationStatus,
        at: datetime,
        error: OperationError | None = None,
        diagnosis: Diagnosis | None = None,
    ) -> bool:
        """Record the end of a RUNNING scale; False when it had ended already (a duplicate event)."""
        update = "SET #status = :status, updatedAt = :now"
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":running": {"S": OperationStatus.RUNNING.value},
            ":now": time_value(at),
        }
        names = {"#status": "status"}
        for name, value in (("error", error), ("diagnosis", diagnosis)):
            if value is not None:
                update += f", #{name} = :{name}"
                names[f"#{name}"] = name
                values[f":{name}"] = attribute_value(record_values(value))
        return self._update_if(
            Key=key_attributes(operation_key(operation_id)),
            UpdateExpression=update,
            ConditionExpression="#status = :running",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def claim_launch_failure(self, cluster_name: str, instance_id: str, *, now: datetime) -> bool:
        """Take the alert of this instance's failed launch; False when it was taken already."""
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item={
                    **key_attributes(self._failure_key(cluster_name, instance_id)),
                    "claimedAt": {"S": now.isoformat()},
                    "expiresAt": {"N": str(int((now + CLAIM_RETENTION).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def release_launch_failure(self, cluster_name: str, instance_id: str) -> None:
        """The claimed alert could not be sent: the redelivered event sends it."""
        self.dynamodb.delete_item(
            TableName=self._table, Key=key_attributes(self._failure_key(cluster_name, instance_id))
        )

    @staticmethod
    def _failure_key(cluster_name: str, instance_id: str) -> dict[str, str]:
        return {"pk": cluster_key(cluster_name)["pk"], "sk": f"{LAUNCH_FAILURE_PREFIX}{instance_id}"}

    def _update_if(self, **request: Any) -> bool:
        try:
            self.dynamodb.update_item(TableName=self._table, **request)
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True
