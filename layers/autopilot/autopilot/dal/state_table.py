"""The state table (DynamoDB) behind the StateStore protocol: cluster registry, operations, history.

One table (pk/sk + GSI ``by-kind`` on kind/sk); the layout is documented in docs/operations.md. The
Step Functions workflows update the same items with the optimized ``dynamodb:updateItem`` integration,
so attribute names here and in statemachines/ must agree.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot_config.models.constraints import NAME_PATTERN
from botocore.exceptions import ClientError

from autopilot import aws, clock
from autopilot.dal.table import (
    BY_KIND_INDEX,
    CLUSTER_KIND,
    HISTORY_KIND,
    OPERATION_KIND,
    attribute_value,
    cluster_key,
    from_item,
    history_key,
    is_condition_failure,
    key_attributes,
    operation_key,
    record_values,
    time_value,
    to_item,
)
from autopilot.errors import ClusterBusyError, ClusterNameTakenError, InvalidPageTokenError
from autopilot.models import records
from autopilot.models.records import (
    DELETABLE_STATUSES,
    REUSABLE_NAME_STATUSES,
    ClusterStatus,
    OperationStatus,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    # Read as ``records.Name`` where an item is read or made: a function that reads only clusters creates
    # no operation or history class (autopilot.models.records).
    from autopilot.models.records import Cluster, HistoryEntry, Operation, OperationError, Page

# A page token names a cluster (SageMaker's ClusterName: 1-63 characters of this pattern).
CLUSTER_NAME = re.compile(NAME_PATTERN)
CLUSTER_NAME_MAX = 63
# Index entries one list query reads at least (see StateTable.list_clusters).
_LIST_READ_BATCH = 100


def _cluster_item(cluster: Cluster) -> dict[str, Any]:
    """The cluster's registry item, as start_create and an adopting start_delete put it."""
    return to_item(cluster_key(cluster.cluster_name), CLUSTER_KIND, cluster)


def _start_key(after_cluster: str) -> dict[str, Any]:
    """The ExclusiveStartKey in the by-kind index after this cluster."""
    return {"kind": {"S": CLUSTER_KIND}, **key_attributes(cluster_key(after_cluster))}


def fail_running_write(
    table: str, operation_id: str, error: OperationError, now: datetime
) -> TransactWriteItemTypeDef:
    """The transaction item that records a RUNNING operation FAILED with ``error`` (and only a RUNNING
    one: an outcome already written is never overwritten)."""
    return {
        "Update": {
            "TableName": table,
            "Key": key_attributes(operation_key(operation_id)),
            "UpdateExpression": "SET #status = :failed, #error = :error, updatedAt = :now",
            "ConditionExpression": "#status = :running",
            "ExpressionAttributeNames": {"#status": "status", "#error": "error"},
            "ExpressionAttributeValues": {
                ":failed": {"S": OperationStatus.FAILED.value},
                ":running": {"S": OperationStatus.RUNNING.value},
                ":error": attribute_value(record_values(error)),
                ":now": time_value(now),
            },
        }
    }


def operation_put(table: str, operation: Operation) -> TransactWriteItemTypeDef:
    """The transaction item that records a new operation (never over an existing one)."""
    return {
        "Put": {
            "TableName": table,
            "Item": to_item(operation_key(operation.operation_id), OPERATION_KIND, operation),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def history_put(table: str, operation: Operation) -> TransactWriteItemTypeDef:
    """The transaction item that lists a new operation in its cluster's history."""
    entry = records.HistoryEntry(
        cluster_name=operation.cluster_name,
        at=operation.created_at,
        operation_id=operation.operation_id,
        operation_type=operation.operation_type,
        requested_by=operation.requested_by,
    )
    return {"Put": {"TableName": table, "Item": to_item(history_key(entry), HISTORY_KIND, entry)}}


class StateTable:
    """The StateStore in DynamoDB (autopilot.dal.state_store)."""

    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self._table = table_name
        self._injected = client

    @property
    def _ddb(self) -> DynamoDBClient:
        if self._injected is not None:
            return self._injected
        ddb: DynamoDBClient = aws.client("dynamodb")
        return ddb

    # --- writes -----------------------------------------------------------------------------

    def start_create(self, cluster: Cluster, operation: Operation) -> None:
        """Register a new cluster and its CreateCluster operation, atomically.

        Raises ClusterNameTakenError when the name belongs to a cluster that still exists.
        """
        cluster_put: TransactWriteItemTypeDef = {
            "Put": {
                "TableName": self._table,
                "Item": _cluster_item(cluster),
                "ConditionExpression": "attribute_not_exists(pk) OR #status IN (:gone1, :gone2)",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":gone1": {"S": REUSABLE_NAME_STATUSES[0].value},
                    ":gone2": {"S": REUSABLE_NAME_STATUSES[1].value},
                },
            }
        }
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    cluster_put,
                    operation_put(self._table, operation),
                    history_put(self._table, operation),
                ]
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                raise ClusterNameTakenError(cluster.cluster_name) from exc
            raise

    def start_delete(self, cluster: Cluster, operation: Operation, *, adopt: bool) -> None:
        """Mark the cluster DELETING and record its DeleteCluster operation, atomically.

        ``adopt`` registers a cluster that exists in SageMaker but not in the registry (created
        outside Autopilot). Raises ClusterBusyError when another operation holds the cluster.
        """
        if adopt:
            cluster_write: TransactWriteItemTypeDef = {
                "Put": {
                    "TableName": self._table,
                    "Item": _cluster_item(cluster),
                    "ConditionExpression": "attribute_not_exists(pk) OR #status = :deleted",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {":deleted": {"S": ClusterStatus.DELETED.value}},
                }
            }
        else:
            cluster_write = {
                "Update": {
                    "TableName": self._table,
                    "Key": key_attributes(cluster_key(cluster.cluster_name)),
                    "UpdateExpression": "SET #status = :deleting, lastOperationId = :op, updatedAt = :now",
                    "ConditionExpression": "#status IN (:s1, :s2, :s3)",
                    "ExpressionAttributeNames": {"#status": "status"},
                    "ExpressionAttributeValues": {
                        ":deleting": {"S": ClusterStatus.DELETING.value},
                        ":op": {"S": operation.operation_id},
                        ":now": time_value(operation.created_at),
                        ":s1": {"S": DELETABLE_STATUSES[0].value},
                        ":s2": {"S": DELETABLE_STATUSES[1].value},
                        ":s3": {"S": DELETABLE_STATUSES[2].value},
                    },
                }
            }
        try:
            self._ddb.transact_write_items(
                TransactItems=[
                    cluster_write,
                    operation_put(self._table, operation),
                    history_put(self._table, operation),
                ]
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                raise ClusterBusyError(cluster.cluster_name) from exc
            raise

    def set_execution_arn(self, operation_id: str, execution_arn: str) -> None:
        self._ddb.update_item(
            TableName=self._table,
            Key=key_attributes(operation_key(operation_id)),
            UpdateExpression="SET executionArn = :arn, updatedAt = :now",
            ExpressionAttributeValues={":arn": {"S": execution_arn}, ":now": time_value(clock.now())},
        )

    def fail_operation(
        self, operation_id: str, cluster_name: str, cluster_status: ClusterStatus, error: OperationError
    ) -> None:
        """Record that an operation failed before its workflow could (e.g. StartExecution failed)."""
        now = clock.now()
        self._ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": key_attributes(operation_key(operation_id)),
                        "UpdateExpression": "SET #status = :failed, #error = :error, updatedAt = :now",
                        "ExpressionAttributeNames": {"#status": "status", "#error": "error"},
                        "ExpressionAttributeValues": {
                            ":failed": {"S": OperationStatus.FAILED.value},
                            ":error": attribute_value(record_values(error)),
                            ":now": time_value(now),
                        },
                    }
                },
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": key_attributes(cluster_key(cluster_name)),
                        "UpdateExpression": "SET #status = :status, updatedAt = :now",
                        "ExpressionAttributeNames": {"#status": "status"},
                        "ExpressionAttributeValues": {
                            ":status": {"S": cluster_status.value},
                            ":now": time_value(now),
                        },
                    }
                },
            ]
        )

    def fail_running_operation(
        self,
        operation: Operation,
        error: OperationError,
        *,
        cluster_status: ClusterStatus,
        sagemaker_status: str | None,
        now: datetime,
    ) -> bool:
        """Record FAILED for an operation whose workflow died without saying so; False if it was final.

        Conditional, so it never overwrites an outcome the workflow wrote meanwhile: the operation only
        while RUNNING, and the cluster only while this operation still holds it (a newer operation's
        state is left alone). ``sagemaker_status`` None means SageMaker has no such cluster.
        """
        operation_write = fail_running_write(self._table, operation.operation_id, error, now)
        cluster_values: dict[str, Any] = {
            ":status": {"S": cluster_status.value},
            ":op": {"S": operation.operation_id},
            ":now": time_value(now),
        }
        update = "SET #status = :status, updatedAt = :now REMOVE sagemakerStatus"
        if sagemaker_status is not None:
            update = "SET #status = :status, updatedAt = :now, sagemakerStatus = :seen"
            cluster_values[":seen"] = {"S": sagemaker_status}
        cluster_write: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self._table,
                "Key": key_attributes(cluster_key(operation.cluster_name)),
                "UpdateExpression": update,
                "ConditionExpression": "lastOperationId = :op",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": cluster_values,
            }
        }
        try:
            self._ddb.transact_write_items(TransactItems=[operation_write, cluster_write])
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return False  # the operation is already SUCCEEDED or FAILED
            # Another operation holds the cluster now: record this one's failure only.
            try:
                self._ddb.update_item(**operation_write["Update"])
            except ClientError as again:
                if is_condition_failure(again):
                    return False
                raise
        return True

    # --- reads ------------------------------------------------------------------------------

    def list_running_operations(self, *, created_after: datetime) -> list[Operation]:
        """Operations still RUNNING that were accepted after ``created_after`` (oldest first).

        Operation ids start with their creation time (``new_operation_id``), so the sort key bounds
        the read to recent operations instead of every operation ever recorded.
        """
        start = f"OPERATION#op-{created_after.strftime('%Y%m%d%H%M%S')}"
        found: list[Operation] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": BY_KIND_INDEX,
            "KeyConditionExpression": "kind = :kind AND sk >= :start",
            "FilterExpression": "#status = :running",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":kind": {"S": OPERATION_KIND},
                ":start": {"S": start},
                ":running": {"S": OperationStatus.RUNNING.value},
            },
        }
        while True:
            response = self._ddb.query(**kwargs)
            found += [from_item(records.Operation, i) for i in response.get("Items", [])]
            if "LastEvaluatedKey" not in response:
                return found
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def get_cluster(self, name: str) -> Cluster | None:
        item = self._ddb.get_item(
            TableName=self._table, Key=key_attributes(cluster_key(name)), ConsistentRead=True
        ).get("Item")
        return from_item(records.Cluster, item) if item else None

    def get_operation(self, operation_id: str) -> Operation | None:
        item = self._ddb.get_item(
            TableName=self._table, Key=key_attributes(operation_key(operation_id)), ConsistentRead=True
        ).get("Item")
        return from_item(records.Operation, item) if item else None

    def list_clusters(
        self, *, limit: int = 50, next_token: str | None = None, include_deleted: bool = False
    ) -> Page[Cluster]:
        """Registered clusters in name order (the GSI sorts by sk = CLUSTER#<name>), ``limit`` a page.

        DELETED clusters are filtered in the query, and since DynamoDB applies ``Limit`` before the
        filter, reads go on past them until the page is full and one more cluster shows that another
        page follows: a page is short only when it is the last, and a token never leads to an empty page.
        """
        start = _start_key(decode_page_token(next_token)) if next_token else None
        found: list[Cluster] = []
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": BY_KIND_INDEX,
                "KeyConditionExpression": "kind = :kind",
                "ExpressionAttributeValues": {":kind": {"S": CLUSTER_KIND}},
                # DynamoDB bills the bytes read, not the calls: a batch this size keeps the calls few
                # when many deleted clusters sit between live ones.
                "Limit": max(limit + 1, _LIST_READ_BATCH),
            }
            if not include_deleted:
                kwargs["FilterExpression"] = "#status <> :deleted"
                kwargs["ExpressionAttributeNames"] = {"#status": "status"}
                kwargs["ExpressionAttributeValues"][":deleted"] = {"S": ClusterStatus.DELETED.value}
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = self._ddb.query(**kwargs)
            found += [from_item(records.Cluster, i) for i in response.get("Items", [])]
            start = response.get("LastEvaluatedKey")
            if len(found) > limit or not start:
                break
        page = found[:limit]
        more = len(found) > limit
        return records.Page[records.Cluster](
            items=page, next_token=encode_page_token(page[-1].cluster_name) if more else None
        )

    def list_history(self, cluster_name: str, *, limit: int = 20) -> list[HistoryEntry]:
        """The cluster's most recent operations, newest first."""
        response = self._ddb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :history)",
            ExpressionAttributeValues={
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":history": {"S": "HISTORY#"},
            },
            ScanIndexForward=False,
            Limit=limit,
        )
        return [from_item(records.HistoryEntry, i) for i in response.get("Items", [])]


def encode_page_token(after_cluster: str) -> str:
    """A page token: the name of the last cluster listed (the next page starts after it)."""
    return base64.urlsafe_b64encode(json.dumps({"after": after_cluster}).encode()).decode()


def decode_page_token(token: str) -> str:
    """The name of the cluster a page token starts after.

    A forged token can at most name another cluster to start after: the name is rebuilt into a key,
    never passed through, so DynamoDB sees only well-formed keys.
    """
    try:
        plain = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (UnicodeError, binascii.Error, ValueError) as exc:
        raise InvalidPageTokenError(token) from exc
    after = plain.get("after") if isinstance(plain, dict) and plain.keys() == {"after"} else None
    if not isinstance(after, str) or len(after) > CLUSTER_NAME_MAX or not CLUSTER_NAME.fullmatch(after):
        raise InvalidPageTokenError(token)
    return after
