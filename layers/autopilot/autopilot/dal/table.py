"""The state table's one vocabulary: keys, items to and from DynamoDB attributes, condition failures.

Every DAL module builds its keys and (de)serializes its items here, so that a cluster's key, the way a
record becomes an item and what counts as "the condition did not hold" are written once (issue 22,
"one shared table module"). Records hold ``datetime``; an item holds its ISO text (``records.iso``):
``to_item`` / ``from_item`` are that edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from autopilot.models.records import iso

if TYPE_CHECKING:
    from datetime import datetime

    from botocore.exceptions import ClientError
    from pydantic import BaseModel

    from autopilot.models.records import HistoryEntry

CLUSTER_KIND = "CLUSTER"
OPERATION_KIND = "OPERATION"
HISTORY_KIND = "HISTORY"
BY_KIND_INDEX = "by-kind"
HISTORY_PREFIX = "HISTORY#"

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def cluster_key(name: str) -> dict[str, str]:
    return {"pk": f"CLUSTER#{name}", "sk": f"CLUSTER#{name}"}


def operation_key(operation_id: str) -> dict[str, str]:
    return {"pk": f"OPERATION#{operation_id}", "sk": f"OPERATION#{operation_id}"}


def key_attributes(key: Mapping[str, str]) -> dict[str, Any]:
    """A key (``pk``/``sk``, or an index's) as DynamoDB attribute values."""
    return {k: {"S": v} for k, v in key.items()}


def attribute_value(value: Any) -> Any:
    """One value as a DynamoDB attribute value (an ExpressionAttributeValues entry)."""
    return _serializer.serialize(value)


def time_value(moment: datetime) -> dict[str, str]:
    """A time as the table holds it (``records.iso``), for an ExpressionAttributeValues entry."""
    return {"S": iso(moment)}


def to_attributes(data: Mapping[str, Any]) -> dict[str, Any]:
    """Plain values as an item's attributes; None is left out (DynamoDB has no "absent" value)."""
    return {k: _serializer.serialize(v) for k, v in data.items() if v is not None}


def from_attributes(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item's attributes as plain values (numbers as Decimal)."""
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def record_values(record: BaseModel) -> dict[str, Any]:
    """A record's attributes as stored: camelCase names, times as ISO text, absent fields left out."""
    values: dict[str, Any] = record.model_dump(by_alias=True, mode="json", exclude_none=True)
    return values


def to_item(key: Mapping[str, str], kind: str | None, record: BaseModel) -> dict[str, Any]:
    """The item that stores ``record`` under ``key`` (with its ``kind`` for the by-kind index)."""
    return to_attributes({**key, **({"kind": kind} if kind else {}), **record_values(record)})


def from_item[M: BaseModel](model: type[M], item: Mapping[str, Any]) -> M:
    """The record an item holds (keys and attributes the model does not name are ignored)."""
    return model.model_validate(from_attributes(item))


def is_condition_failure(exc: ClientError) -> bool:
    """The write's condition did not hold: a ConditionExpression, or one in a cancelled transaction."""
    code = exc.response.get("Error", {}).get("Code")
    if code == "ConditionalCheckFailedException":
        return True
    if code != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons", [])
    return any(r.get("Code") == "ConditionalCheckFailed" for r in reasons)


def history_key(entry: HistoryEntry) -> dict[str, str]:
    """A history entry's key: under its cluster, in time order (``at`` as stored, then the operation)."""
    at = record_values(entry)["at"]
    return {"pk": cluster_key(entry.cluster_name)["pk"], "sk": f"{HISTORY_PREFIX}{at}#{entry.operation_id}"}
