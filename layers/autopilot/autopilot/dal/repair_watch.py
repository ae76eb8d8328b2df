"""Since when the sweep has seen a repair RUNNING: ``sweepSeenAt`` on the operation item.

The sweep judges a repair overdue on its own clock, from its first sighting of the operation RUNNING
(``if_not_exists``: later sweeps keep it), not from ``createdAt``: an operation is recorded on the
clock of whoever started it (the API's, an event's time), which need not be the schedule's (in the
sandbox the schedules and the workflows' timers run on the simulated clock). The first sighting comes
at most one sweep interval after the start, so a repair is failed at most that much later.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.table import is_condition_failure, key_attributes, operation_key, time_value
from autopilot.models.records import OperationStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class RepairWatch:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def running_since(self, operation_id: str, *, at: datetime) -> datetime | None:
        """When the sweep first saw the operation RUNNING (``at`` for a first sighting); None when it
        is no longer RUNNING."""
        try:
            response = self.dynamodb.update_item(
                TableName=self._table,
                Key=key_attributes(operation_key(operation_id)),
                UpdateExpression="SET sweepSeenAt = if_not_exists(sweepSeenAt, :at)",
                ConditionExpression="#status = :running",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":at": time_value(at),
                    ":running": {"S": OperationStatus.RUNNING.value},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            raise
        return datetime.fromisoformat(response["Attributes"]["sweepSeenAt"]["S"])
