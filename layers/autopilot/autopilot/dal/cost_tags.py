"""The TAGS item of a cluster in the state table: the last cost-tag repair CostTaggerFunction made.

``pk`` = ``CLUSTER#<name>``, ``sk`` = ``TAGS`` (no ``kind``: never listed). Written only when the drift
sweep changed something, so an hourly check of a cluster whose tags hold costs no write.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from autopilot.aws import LazyClient
from autopilot.dal.table import time_value
from autopilot.models.records import Time

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TAGS_SORT_KEY = "TAGS"


class TagRepairs(BaseModel):
    """A cluster's TAGS item: when tags were last repaired, what changed then, how many repairs in all."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    cluster_name: str
    repaired_at: Time
    # [{resource, kind, set, previous}] as autopilot.logic.cost_tags.TagChange dumps them
    changes: list[dict[str, object]]
    repairs: int

    @field_validator("changes", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value


def tags_key(cluster_name: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"CLUSTER#{cluster_name}"}, "sk": {"S": TAGS_SORT_KEY}}


class TagRepairRecords:
    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def record(self, cluster_name: str, repaired_at: datetime, changes_json: str) -> None:
        self.dynamodb.update_item(
            TableName=self._table,
            Key=tags_key(cluster_name),
            UpdateExpression="SET clusterName = :name, repairedAt = :at, changes = :changes ADD repairs :one",
            ExpressionAttributeValues={
                ":name": {"S": cluster_name},
                ":at": time_value(repaired_at),
                ":changes": {"S": changes_json},
                ":one": {"N": "1"},
            },
        )

    def get(self, cluster_name: str) -> TagRepairs | None:
        item = self.dynamodb.get_item(TableName=self._table, Key=tags_key(cluster_name)).get("Item")
        if item is None:
            return None
        return TagRepairs.model_validate(
            {
                "clusterName": item["clusterName"]["S"],
                "repairedAt": item["repairedAt"]["S"],
                "changes": item["changes"]["S"],
                "repairs": int(item["repairs"]["N"]),
            }
        )
