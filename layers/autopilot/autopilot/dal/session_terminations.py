"""The sessions SessionGuard terminated: ``SESSION#<sessionId>`` items under their cluster in the state
table (layout in docs/operations.md, "Session limits").

The item is also the claim that makes a termination happen once: a duplicated CloudTrail event, a
retried invocation and the schedule all try to put it, and only the first put succeeds. A claim whose
invocation died before TerminateSession answered (no ``terminatedAt``) may be taken over once it is
older than :data:`CLAIM_LEASE`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.table import (
    attribute_value,
    cluster_key,
    from_item,
    is_condition_failure,
    record_values,
    time_value,
)
from autopilot.models.sessions import SessionTermination

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SESSION_KIND = "SESSION"
# Longer than SessionGuardFunction's timeout (60 s): a claim this old belongs to an invocation that ended.
CLAIM_LEASE = timedelta(minutes=5)


def session_key(cluster_name: str, session_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": cluster_key(cluster_name)["pk"]}, "sk": {"S": f"SESSION#{session_id}"}}


class SessionTerminations:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def claim(self, termination: SessionTermination, *, stale_before: datetime) -> bool:
        """Put the record; False when the session is already recorded (terminated, or claimed by an
        invocation that may still terminate it: claimed at ``stale_before`` or later)."""
        data = record_values(termination)
        item: dict[str, Any] = {
            **session_key(termination.cluster_name, termination.session_id),
            "kind": {"S": SESSION_KIND},
            **{key: attribute_value(value) for key, value in data.items()},
        }
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=(
                    "attribute_not_exists(sk) OR (attribute_not_exists(terminatedAt) AND claimedAt < :stale)"
                ),
                ExpressionAttributeValues={":stale": time_value(stale_before)},
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def complete(self, termination: SessionTermination, terminated_at: datetime) -> None:
        """TerminateSession answered: the record is final (never claimed again)."""
        self.dynamodb.update_item(
            TableName=self._table,
            Key=session_key(termination.cluster_name, termination.session_id),
            UpdateExpression="SET terminatedAt = :at",
            ExpressionAttributeValues={":at": time_value(terminated_at)},
        )

    def release(self, termination: SessionTermination) -> None:
        """TerminateSession failed: drop this invocation's claim, so the next attempt may terminate."""
        try:
            self.dynamodb.delete_item(
                TableName=self._table,
                Key=session_key(termination.cluster_name, termination.session_id),
                ConditionExpression="claimedAt = :mine AND attribute_not_exists(terminatedAt)",
                ExpressionAttributeValues={":mine": time_value(termination.claimed_at)},
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # another invocation's claim now: leave it
                raise

    def list_for_cluster(self, cluster_name: str) -> list[SessionTermination]:
        """The cluster's recorded terminations (session id order)."""
        found: list[SessionTermination] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :session)",
            "ExpressionAttributeValues": {
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":session": {"S": "SESSION#"},
            },
        }
        while True:
            response = self.dynamodb.query(**kwargs)
            found += [from_item(SessionTermination, item) for item in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
