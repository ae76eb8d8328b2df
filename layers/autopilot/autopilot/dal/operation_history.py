"""A cluster's operations, newest first, a page at a time (GET /clusters/{name}/operations).

Every operation has a HISTORY entry in its cluster's partition (``CLUSTER#<name>`` /
``HISTORY#<createdAt>#<operationId>``, written in the same transaction as the operation), so one query
of that partition, read backwards, lists them in order; the operations themselves come with one
BatchGetItem per page.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import TYPE_CHECKING, Any

from autopilot.aws import LazyClient
from autopilot.dal.table import (
    HISTORY_PREFIX,
    cluster_key,
    from_item,
    history_key,
    key_attributes,
    operation_key,
)
from autopilot.errors import InvalidPageTokenError
from autopilot.models.records import HistoryEntry, Operation, OperationType, Page

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# What a page token carries: the sort key suffix of the last entry listed (``<createdAt>#<operationId>``).
_POSITION = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z#op-\d{14}-[0-9a-f]{8}")
# History entries one query reads at least: DynamoDB applies Limit before the kind filter.
_READ_BATCH = 100
# BatchGetItem reads at most 100 keys a call.
_BATCH_GET_MAX = 100


class OperationHistory:
    """The history entries and operation items of the state table, for listing."""

    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, *, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def list_operations(
        self, cluster_name: str, *, kind: OperationType | None, limit: int, next_token: str | None
    ) -> Page[Operation]:
        """The cluster's operations (of ``kind``, if given), newest first, ``limit`` a page.

        As for the cluster list, reads go on past entries of other kinds until the page is full and one
        more entry shows that another page follows: a token never leads to an empty page.
        InvalidPageTokenError for a token this API did not issue.
        """
        pk = cluster_key(cluster_name)["pk"]
        start: dict[str, Any] | None = None
        if next_token:
            start = {"pk": {"S": pk}, "sk": {"S": HISTORY_PREFIX + decode_position(next_token)}}
        entries: list[HistoryEntry] = []
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :history)",
                "ExpressionAttributeValues": {":pk": {"S": pk}, ":history": {"S": HISTORY_PREFIX}},
                "ScanIndexForward": False,
                "Limit": max(limit + 1, _READ_BATCH),
            }
            if kind is not None:
                kwargs["FilterExpression"] = "operationType = :kind"
                kwargs["ExpressionAttributeValues"][":kind"] = {"S": kind.value}
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = self.dynamodb.query(**kwargs)
            entries += [from_item(HistoryEntry, i) for i in response.get("Items", [])]
            start = response.get("LastEvaluatedKey")
            if len(entries) > limit or not start:
                break
        page = entries[:limit]
        more = len(entries) > limit
        return Page[Operation](
            items=self._operations([e.operation_id for e in page]),
            next_token=encode_position(page[-1]) if more else None,
        )

    def _operations(self, operation_ids: list[str]) -> list[Operation]:
        """The operations, in the order asked (an id without an item is left out)."""
        found: dict[str, Operation] = {}
        for first in range(0, len(operation_ids), _BATCH_GET_MAX):
            keys = [key_attributes(operation_key(i)) for i in operation_ids[first : first + _BATCH_GET_MAX]]
            request: dict[str, Any] = {self._table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                response = self.dynamodb.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    operation = from_item(Operation, item)
                    found[operation.operation_id] = operation
                # Keys DynamoDB did not read this time (throttling, the 16 MB cap); boto3 retries the call.
                request = dict(response.get("UnprocessedKeys") or {})
        return [found[i] for i in operation_ids if i in found]


def encode_position(entry: HistoryEntry) -> str:
    """A page token: the last entry listed (the next page starts after it)."""
    position = history_key(entry)["sk"].removeprefix(HISTORY_PREFIX)
    return base64.urlsafe_b64encode(json.dumps({"after": position}).encode()).decode()


def decode_position(token: str) -> str:
    """The history position a page token starts after; InvalidPageTokenError unless this API issued
    it (a forged token can at most name another position: it is rebuilt into a key, never passed on)."""
    try:
        plain = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise InvalidPageTokenError(token) from exc
    after = plain.get("after") if isinstance(plain, dict) and plain.keys() == {"after"} else None
    if not isinstance(after, str) or not _POSITION.fullmatch(after):
        raise InvalidPageTokenError(token)
    return after
