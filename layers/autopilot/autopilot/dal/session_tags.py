"""The ``SSMSessionRunAs`` session tags of role sessions, as CloudTrail's AssumeRole* records gave them:
``SESSIONTAG#<session ARN>`` / ``RUNAS`` items of the state table, removed by its TTL (``expiresAt``)
once the session's credentials have expired.

Session Manager maps a session to the POSIX user of its principal's ``SSMSessionRunAs`` tag, a session
tag included, but neither DescribeSessions nor StartSession's CloudTrail record shows session tags:
only the record of the AssumeRole* call that made the session does. A session name can be reused:
the latest record of a name holds until it expires.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from autopilot.aws import LazyClient

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def session_tag_key(session_arn: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"SESSIONTAG#{session_arn}"}, "sk": {"S": "RUNAS"}}


class SessionRunAsTags:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def record(self, session_arn: str, run_as: str, *, expires: datetime) -> None:
        self.dynamodb.put_item(
            TableName=self._table,
            Item={
                **session_tag_key(session_arn),
                "sessionArn": {"S": session_arn},
                "runAs": {"S": run_as},
                "expiresAt": {"N": str(int(expires.timestamp()))},
            },
        )

    def run_as(self, session_arn: str, *, now: datetime) -> str | None:
        """The session's ``SSMSessionRunAs`` session tag, unless its credentials have expired (TTL
        removes an item up to days late)."""
        item = self.dynamodb.get_item(TableName=self._table, Key=session_tag_key(session_arn)).get("Item")
        if item is None or int(item["expiresAt"]["N"]) <= now.timestamp():
            return None
        return item["runAs"]["S"]
