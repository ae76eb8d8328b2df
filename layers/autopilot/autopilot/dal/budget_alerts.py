"""BudgetAlertsFunction's items in the state table: one alert per (budget, threshold, period), the
ScaleToMin operations it records, and a cluster's growth block.

- Alert item: ``pk=BUDGET#{budgetName}``, ``sk=ALERT#{period}#{ACTUAL|FORECASTED}#{percent}``, kind
  ``BUDGET_ALERT``: ``claimedAt`` (who handles it, as a lease), ``operationId`` (the ScaleToMin operation
  it enforces with, chosen at the claim so a retry records the same one), ``publishedAt`` and
  ``messageId`` once the alert went out, ``expiresAt`` (TTL, after the period). The claim is a
  conditional put, so AWS Budgets notifying twice (or SNS delivering twice) publishes once. An item
  not yet published is work left: it keeps the notification (``message``, ``subject``) and, once the
  alert is built but SNS refused it, the alert itself (``alertSubject``, ``alertBody``), so the
  scheduled retry (logic/budget_alert_retry.py) finishes it instead of a dead-letter queue.
- The cluster item (dal/state_table.py) gains ``growthBlockedUntil`` / ``growthBlockedAt`` /
  ``growthBlockedBy`` (block-growth), removed by an admin's ``DELETE /clusters/{name}/growth-block``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.state_table import history_put, operation_put
from autopilot.dal.table import (
    BY_KIND_INDEX,
    attribute_value,
    cluster_key,
    from_attributes,
    is_condition_failure,
    key_attributes,
    operation_key,
    record_values,
    time_value,
    to_attributes,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from autopilot.models.records import Operation, OperationError, OperationStatus, Step

ALERT_KIND = "BUDGET_ALERT"


@dataclass(frozen=True)
class AlertKey:
    budget_name: str
    period: str  # "2026-11" (MONTHLY), "2026-11-22" (DAILY), "2026-Q4", "2026"
    alert_type: str  # ACTUAL | FORECASTED
    threshold: str  # the threshold percent as text ("80", "100", "80.5")

    def item_key(self) -> dict[str, str]:
        return {
            "pk": f"BUDGET#{self.budget_name}",
            "sk": f"ALERT#{self.period}#{self.alert_type}#{self.threshold}",
        }


class ClaimResult(StrEnum):
    CLAIMED = "claimed"  # first to handle it: enforce and publish
    TAKEN_OVER = "taken-over"  # an earlier handler died before publishing: finish its work
    PUBLISHED = "published"  # a duplicate: the alert already went out
    IN_FLIGHT = "in-flight"  # another handler holds a live claim: retry later


@dataclass(frozen=True)
class Claim:
    result: ClaimResult
    operation_id: str | None


@dataclass(frozen=True)
class UnfinishedAlert:
    """An alert item not yet published: the notification, and the alert once it was built."""

    key: AlertKey
    claimed_at: datetime
    message: str | None
    subject: str | None
    alert_subject: str | None
    alert_body: str | None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class BudgetAlertTable:
    ddb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, ddb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._ddb = ddb

    # --- one alert per (budget, threshold, period) ----------------------------------------------

    def claim(
        self,
        key: AlertKey,
        *,
        now: datetime,
        lease_seconds: int,
        operation_id: str | None,
        expires_at: int,
        message: str | None = None,
        subject: str | None = None,
    ) -> Claim:
        item = {
            **key.item_key(),
            "kind": ALERT_KIND,
            "budgetName": key.budget_name,
            "period": key.period,
            "alertType": key.alert_type,
            "thresholdPercent": key.threshold,
            "claimedAt": now.isoformat(),
            "operationId": operation_id,
            "expiresAt": expires_at,
            "message": message,
            "subject": subject,
        }
        try:
            self.ddb.put_item(
                TableName=self._table,
                Item=to_attributes(item),
                ConditionExpression="attribute_not_exists(pk)",
            )
            return Claim(ClaimResult.CLAIMED, operation_id)
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
        key_values = key_attributes(key.item_key())
        stored = self.ddb.get_item(TableName=self._table, Key=key_values, ConsistentRead=True).get("Item", {})
        held = from_attributes(stored)
        held_operation = held.get("operationId")
        if "publishedAt" in held:
            return Claim(ClaimResult.PUBLISHED, held_operation)
        claimed_at = datetime.fromisoformat(str(held["claimedAt"]))
        if (now - claimed_at).total_seconds() < lease_seconds:
            return Claim(ClaimResult.IN_FLIGHT, held_operation)
        try:
            self.ddb.update_item(
                TableName=self._table,
                Key=key_attributes(key.item_key()),
                UpdateExpression="SET claimedAt = :now",
                ConditionExpression="claimedAt = :held AND attribute_not_exists(publishedAt)",
                ExpressionAttributeValues={
                    ":now": {"S": now.isoformat()},
                    ":held": {"S": str(held["claimedAt"])},
                },
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return Claim(ClaimResult.IN_FLIGHT, held_operation)
            raise
        return Claim(ClaimResult.TAKEN_OVER, held_operation)

    def mark_published(self, key: AlertKey, *, message_id: str, at: datetime) -> None:
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(key.item_key()),
            UpdateExpression="SET publishedAt = :at, messageId = :id",
            ExpressionAttributeValues={":at": {"S": at.isoformat()}, ":id": {"S": message_id}},
        )

    def keep_alert(self, key: AlertKey, *, subject: str, body: str) -> None:
        """The built alert SNS did not take: the scheduled retry publishes this, as it was."""
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(key.item_key()),
            UpdateExpression="SET alertSubject = :subject, alertBody = :body",
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(publishedAt)",
            ExpressionAttributeValues={":subject": {"S": subject}, ":body": {"S": body}},
        )

    def close(self, key: AlertKey, *, at: datetime, reason: str) -> None:
        """An unfinished alert that will not be published (its crossing is no longer confirmed)."""
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(key.item_key()),
            UpdateExpression="SET publishedAt = :at, closedReason = :reason",
            ExpressionAttributeValues={":at": {"S": at.isoformat()}, ":reason": {"S": reason}},
        )

    def unfinished(self, *, claimed_before: datetime) -> list[UnfinishedAlert]:
        """Alert items not published whose claim is older than ``claimed_before`` (its lease over)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": BY_KIND_INDEX,
            "KeyConditionExpression": "kind = :kind",
            "FilterExpression": "attribute_not_exists(publishedAt) AND claimedAt < :before",
            "ExpressionAttributeValues": {
                ":kind": {"S": ALERT_KIND},
                ":before": {"S": claimed_before.isoformat()},
            },
        }
        found: list[UnfinishedAlert] = []
        while True:
            response = self.ddb.query(**kwargs)
            for raw in response.get("Items", []):
                item = from_attributes(raw)
                key = AlertKey(
                    budget_name=str(item["budgetName"]),
                    period=str(item["period"]),
                    alert_type=str(item["alertType"]),
                    threshold=str(item["thresholdPercent"]),
                )
                found.append(
                    UnfinishedAlert(
                        key=key,
                        claimed_at=datetime.fromisoformat(str(item["claimedAt"])),
                        message=_text(item.get("message")),
                        subject=_text(item.get("subject")),
                        alert_subject=_text(item.get("alertSubject")),
                        alert_body=_text(item.get("alertBody")),
                    )
                )
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # --- the ScaleToMin operation ---------------------------------------------------------------

    def record_operation(self, operation: Operation) -> bool:
        """Put the operation and its cluster history entry; False when the operation exists already
        (a retried alert recording the operation its claim named)."""
        try:
            self.ddb.transact_write_items(
                TransactItems=[operation_put(self._table, operation), history_put(self._table, operation)]
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def finish_operation(
        self,
        operation_id: str,
        *,
        status: OperationStatus,
        steps: list[Step],
        at: datetime,
        error: OperationError | None = None,
    ) -> None:
        values: dict[str, Any] = {
            ":status": {"S": status.value},
            ":steps": attribute_value([record_values(s) for s in steps]),
            ":now": time_value(at),
        }
        update = "SET #status = :status, steps = :steps, updatedAt = :now"
        names = {"#status": "status"}
        if error is not None:
            update += ", #error = :error"
            names["#error"] = "error"
            values[":error"] = attribute_value(record_values(error))
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(operation_key(operation_id)),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    # --- block-growth ---------------------------------------------------------------------------

    def block_growth(self, cluster_name: str, *, until: datetime, at: datetime, by: str) -> None:
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(cluster_key(cluster_name)),
            UpdateExpression="SET growthBlockedUntil = :until, growthBlockedAt = :at, growthBlockedBy = :by",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":until": time_value(until), ":at": time_value(at), ":by": {"S": by}},
        )

    def lift_growth_block(self, cluster_name: str) -> None:
        self.ddb.update_item(
            TableName=self._table,
            Key=key_attributes(cluster_key(cluster_name)),
            UpdateExpression="REMOVE growthBlockedUntil, growthBlockedAt, growthBlockedBy",
            ConditionExpression="attribute_exists(pk)",
        )
