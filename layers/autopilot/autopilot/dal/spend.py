"""The spend meter's items in the state table: per cluster and month figures, cached list prices.

Layout (docs/operations.md, "Spend meter"): a meter item ``pk = CLUSTER#<name>``,
``sk = SPEND#<YYYY-MM>``; a price item ``pk = PRICE#<region>``, ``sk = PRICE#<instance type>`` with
``expiresAt`` (the table's TTL attribute). Neither has a ``kind``: they are never listed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from autopilot.aws import LazyClient
from autopilot.dal.table import attribute_value, from_attributes, is_condition_failure
from autopilot.models.spend import ListPrice, SpendMeter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Meter items outlive their month for a year (last year's figures stay readable, then TTL removes them).
METER_RETENTION = timedelta(days=400)


def meter_key(cluster_name: str, month: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"CLUSTER#{cluster_name}"}, "sk": {"S": f"SPEND#{month}"}}


def price_key(region: str, instance_type: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": f"PRICE#{region}"}, "sk": {"S": f"PRICE#{instance_type}"}}


def stored_time(moment: datetime) -> str:
    """The meter's and the price cache's spelling of a time, to the microsecond: not ``records.iso``,
    because the meter's condition (``asOf < :asOf``) compares the stored text, and one spelling per
    item is what keeps that order (items written before issue 22 hold this one). Read back, it is a
    datetime like any other; the API answers it in ``records.iso``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class SpendStore(Protocol):
    def get_meter(self, cluster_name: str, month: str) -> SpendMeter | None: ...

    def latest_meter(self, cluster_name: str) -> SpendMeter | None:
        """The cluster's most recent month's figures, None before the meter's first run."""

    def put_meter(self, meter: SpendMeter) -> bool:
        """Write the figures unless the stored ones are as recent (False: a retried run already did)."""

    def claim_alert(self, cluster_name: str, month: str, threshold: int) -> bool:
        """Mark the threshold alerted for the month; False if it already was."""

    def release_alert(self, cluster_name: str, month: str, threshold: int) -> None:
        """Undo a claim whose alert could not be published (the next run tries again)."""

    def get_price(self, region: str, instance_type: str, *, now: datetime) -> ListPrice | None:
        """The cached price, None when absent or expired."""

    def put_price(self, price: ListPrice, *, expires_at: datetime) -> None: ...


class SpendTable:
    """SpendStore on the state table (DynamoDB)."""

    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")

    def __init__(self, table_name: str, dynamodb: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._dynamodb = dynamodb

    def get_meter(self, cluster_name: str, month: str) -> SpendMeter | None:
        item = self.dynamodb.get_item(
            TableName=self._table, Key=meter_key(cluster_name, month), ConsistentRead=True
        ).get("Item")
        return SpendMeter.model_validate(_plain(item)) if item else None

    def latest_meter(self, cluster_name: str) -> SpendMeter | None:
        items = self.dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :spend)",
            ExpressionAttributeValues={
                ":pk": meter_key(cluster_name, "")["pk"],
                ":spend": {"S": "SPEND#"},
            },
            ScanIndexForward=False,  # SPEND#<YYYY-MM> sorts by month
            Limit=1,
            ConsistentRead=True,
        ).get("Items", [])
        return SpendMeter.model_validate(_plain(items[0])) if items else None

    def put_meter(self, meter: SpendMeter) -> bool:
        figures: dict[str, Any] = {
            "clusterName": meter.cluster_name,
            "month": meter.month,
            "asOf": stored_time(meter.as_of),
            "hourlyRateUsd": meter.hourly_rate_usd,
            "monthToDateUsd": meter.month_to_date_usd,
            "forecastUsd": meter.forecast_usd,
            "budgetUsd": meter.budget_usd,
            "project": meter.project,
            "unpriced": meter.unpriced,
            "expiresAt": int((meter.as_of + METER_RETENTION).timestamp()),
        }
        # every name through a placeholder: "month" and "project" are DynamoDB reserved words
        names = {f"#{attribute}": attribute for attribute in figures}
        sets = [f"#{a} = :{a}" for a, value in figures.items() if value is not None]
        removes = [f"#{a}" for a, value in figures.items() if value is None]
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        values = {f":{a}": attribute_value(v) for a, v in figures.items() if v is not None}
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=meter_key(meter.cluster_name, meter.month),
                UpdateExpression=expression,
                # A retried invocation carries the same schedule time: it must not add the spend twice.
                ConditionExpression="attribute_not_exists(#asOf) OR #asOf < :asOf",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def claim_alert(self, cluster_name: str, month: str, threshold: int) -> bool:
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key=meter_key(cluster_name, month),
                UpdateExpression="ADD alerted :thresholds",
                ConditionExpression="attribute_exists(pk) AND NOT contains(alerted, :threshold)",
                ExpressionAttributeValues={
                    ":thresholds": {"NS": [str(threshold)]},
                    ":threshold": {"N": str(threshold)},
                },
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def release_alert(self, cluster_name: str, month: str, threshold: int) -> None:
        self.dynamodb.update_item(
            TableName=self._table,
            Key=meter_key(cluster_name, month),
            UpdateExpression="DELETE alerted :thresholds",
            ExpressionAttributeValues={":thresholds": {"NS": [str(threshold)]}},
        )

    def get_price(self, region: str, instance_type: str, *, now: datetime) -> ListPrice | None:
        item = self.dynamodb.get_item(TableName=self._table, Key=price_key(region, instance_type)).get("Item")
        if not item:
            return None
        plain = _plain(item)
        # DynamoDB's TTL removes expired items within days, not at once: the expiry is checked here.
        if int(plain.get("expiresAt", 0)) <= now.timestamp():
            return None
        return ListPrice.model_validate(plain)

    def put_price(self, price: ListPrice, *, expires_at: datetime) -> None:
        item = {
            **price_key(price.region, price.instance_type),
            "region": {"S": price.region},
            "instanceType": {"S": price.instance_type},
            "usdPerHour": attribute_value(price.usd_per_hour),
            "fetchedAt": {"S": stored_time(price.fetched_at)},
            "expiresAt": {"N": str(int(expires_at.timestamp()))},
        }
        self.dynamodb.put_item(TableName=self._table, Item=item)


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    plain = from_attributes(item)
    if isinstance(plain.get("alerted"), set):
        plain["alerted"] = {int(Decimal(t)) for t in plain["alerted"]}
    return plain


class InMemorySpendStore:
    """SpendStore in memory, with the same conditions (unit tests)."""

    def __init__(self) -> None:
        self.meters: dict[tuple[str, str], SpendMeter] = {}
        self.prices: dict[tuple[str, str], tuple[ListPrice, datetime]] = {}

    def get_meter(self, cluster_name: str, month: str) -> SpendMeter | None:
        found = self.meters.get((cluster_name, month))
        return found.model_copy(deep=True) if found else None

    def latest_meter(self, cluster_name: str) -> SpendMeter | None:
        months = sorted(month for name, month in self.meters if name == cluster_name)
        return self.get_meter(cluster_name, months[-1]) if months else None

    def put_meter(self, meter: SpendMeter) -> bool:
        key = (meter.cluster_name, meter.month)
        stored = self.meters.get(key)
        if stored is not None and stored.as_of >= meter.as_of:
            return False
        alerted = stored.alerted if stored else set()
        self.meters[key] = meter.model_copy(update={"alerted": set(alerted)}, deep=True)
        return True

    def claim_alert(self, cluster_name: str, month: str, threshold: int) -> bool:
        stored = self.meters.get((cluster_name, month))
        if stored is None or threshold in stored.alerted:
            return False
        stored.alerted.add(threshold)
        return True

    def release_alert(self, cluster_name: str, month: str, threshold: int) -> None:
        stored = self.meters.get((cluster_name, month))
        if stored is not None:
            stored.alerted.discard(threshold)

    def get_price(self, region: str, instance_type: str, *, now: datetime) -> ListPrice | None:
        found = self.prices.get((region, instance_type))
        return found[0] if found and found[1] > now else None

    def put_price(self, price: ListPrice, *, expires_at: datetime) -> None:
        self.prices[(price.region, price.instance_type)] = (price, expires_at)
