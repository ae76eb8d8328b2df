"""Workflows waiting on a cluster or a node, and the cluster registry's view of SageMaker's status.

A waiting workflow is an item in the state table beside its cluster (pk ``CLUSTER#<name>``, sk
``WAITER#<execution ARN>``, no ``kind``, so the by-kind index never lists it): one per execution, a
later wait of the same execution replaces it. A waiter with a ``nodeId`` waits on that node
(autopilot.workflows.node_waits), one without on the cluster's status. It is resumed with
SendTaskSuccess / SendTaskFailure on its task token. Writes carry version guards, so duplicated and
reordered messages change nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict

from autopilot.aws import LazyClient
from autopilot.dal.healing import HealingTable
from autopilot.dal.table import cluster_key
from autopilot.models.hyperpod_events import DELETED
from autopilot.models.records import NodeHealth

# What a node wait reports for a node SageMaker does not know (replaced, or its cluster gone).
NODE_NOT_FOUND = "NotFound"

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient

WAITER_PREFIX = "WAITER#"
# A waiter outlives its wait when the wait ends on its own DescribeCluster check (always, for a cluster
# that must be gone: HyperPod sends no event then); DynamoDB's TTL removes it after the longest
# deadline (CreateTimeoutSeconds / DeleteTimeoutSeconds ≤ 23 h) and a day more.
WAITER_TTL_SECONDS = 2 * 24 * 3600
# SendTask* answers for a token that is no longer waiting: the wait timed out or was answered.
_GONE_TOKEN_CODES = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


class Waiter(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    cluster_name: str
    execution_arn: str
    until: str
    task_token: str
    # SQS SentTimestamp (epoch ms) of the wait request: a later request of the same execution wins
    sent_at: int
    # a node wait's instance id (None: the wait is on the cluster)
    node_id: str | None = None


class StatusVersion(BaseModel):
    """Orders a cluster's status reports: event time, then lifecycle rank for the same second."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    time: datetime  # the event's time (EventBridge's, UTC)
    rank: int

    def key(self) -> str:
        # The stored version: sortable text, ISO 8601 in UTC as EventBridge writes it (Z), then the rank.
        return f"{self.time.astimezone(UTC).isoformat().replace('+00:00', 'Z')}#{self.rank:02d}"


class ClusterWaits:
    """The waiter items and the registry's SageMaker status in the state table; SendTask* on tokens."""

    dynamodb: LazyClient[DynamoDBClient] = LazyClient("dynamodb")
    stepfunctions: LazyClient[SFNClient] = LazyClient("stepfunctions")
    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")

    def __init__(
        self,
        table_name: str,
        *,
        dynamodb: DynamoDBClient | None = None,
        stepfunctions: SFNClient | None = None,
        sagemaker: SageMakerClient | None = None,
    ) -> None:
        self._table = table_name
        self._dynamodb = dynamodb
        self._stepfunctions = stepfunctions
        self._sagemaker = sagemaker

    # --- waiters ------------------------------------------------------------------------------

    def put_waiter(self, waiter: Waiter) -> bool:
        """Store the waiter unless a later request of the same execution is stored already."""
        item: dict[str, Any] = {
            "pk": {"S": cluster_key(waiter.cluster_name)["pk"]},
            "sk": {"S": WAITER_PREFIX + waiter.execution_arn},
            "clusterName": {"S": waiter.cluster_name},
            "executionArn": {"S": waiter.execution_arn},
            "until": {"S": waiter.until},
            "taskToken": {"S": waiter.task_token},
            "sentAt": {"N": str(waiter.sent_at)},
            "expiresAt": {"N": str(waiter.sent_at // 1000 + WAITER_TTL_SECONDS)},
        }
        if waiter.node_id is not None:
            item["nodeId"] = {"S": waiter.node_id}
        try:
            self.dynamodb.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression="attribute_not_exists(sk) OR sentAt <= :sent",
                ExpressionAttributeValues={":sent": {"N": str(waiter.sent_at)}},
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def waiters(self, cluster_name: str) -> list[Waiter]:
        """The workflows waiting on the cluster's status."""
        return [w for w in self._waiters(cluster_name) if w.node_id is None]

    def node_waiters(self, cluster_name: str, node_id: str) -> list[Waiter]:
        """The workflows waiting on this node of the cluster."""
        return [w for w in self._waiters(cluster_name) if w.node_id == node_id]

    def _waiters(self, cluster_name: str) -> list[Waiter]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :waiter)",
            "ExpressionAttributeValues": {
                ":pk": {"S": cluster_key(cluster_name)["pk"]},
                ":waiter": {"S": WAITER_PREFIX},
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.dynamodb.query(**kwargs)
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return [
            Waiter(
                cluster_name=i["clusterName"]["S"],
                execution_arn=i["executionArn"]["S"],
                until=i["until"]["S"],
                task_token=i["taskToken"]["S"],
                sent_at=int(i["sentAt"]["N"]),
                node_id=i["nodeId"]["S"] if "nodeId" in i else None,
            )
            for i in items
        ]

    def remove_waiter(self, waiter: Waiter) -> None:
        """Remove this waiter, not a later one of the same execution that replaced it meanwhile."""
        try:
            self.dynamodb.delete_item(
                TableName=self._table,
                Key={
                    "pk": {"S": cluster_key(waiter.cluster_name)["pk"]},
                    "sk": {"S": WAITER_PREFIX + waiter.execution_arn},
                },
                ConditionExpression="taskToken = :token",
                ExpressionAttributeValues={":token": {"S": waiter.task_token}},
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise

    def succeed(self, waiter: Waiter, output: dict[str, Any]) -> bool:
        """Resume the workflow; False when its token no longer waits (timed out, answered before)."""
        return self._answer(
            lambda: self.stepfunctions.send_task_success(
                taskToken=waiter.task_token, output=json.dumps(output)
            )
        )

    @staticmethod
    def _answer(send: Any) -> bool:
        try:
            send()
        except ClientError as exc:
            if _code(exc) in _GONE_TOKEN_CODES:
                return False
            raise
        return True

    # --- SageMaker and the registry -----------------------------------------------------------

    def describe_status(self, cluster_name: str) -> tuple[str, str]:
        """SageMaker's ClusterStatus and FailureMessage now; ("Deleted", "") when there is no cluster."""
        try:
            described = self.sagemaker.describe_cluster(ClusterName=cluster_name)
        except ClientError as exc:
            if _code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return DELETED, ""
            raise
        return str(described["ClusterStatus"]), str(described.get("FailureMessage") or "")

    def describe_node_status(self, cluster_name: str, node_id: str) -> str:
        """The node's InstanceStatus now; "NotFound" when SageMaker has no such node (or cluster)."""
        try:
            described = self.sagemaker.describe_cluster_node(ClusterName=cluster_name, NodeId=node_id)
        except ClientError as exc:
            if _code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return NODE_NOT_FOUND
            raise
        return str(described["NodeDetails"]["InstanceStatus"]["Status"])

    def node_health(self, cluster_name: str, node_id: str) -> NodeHealth | None:
        """The health report held for the node (its node item); None when Autopilot heard of none."""
        record = HealingTable(self._table, dynamodb=self.dynamodb).get_node(cluster_name, node_id)
        return record.health if record is not None else None

    def registered_arn(self, cluster_name: str) -> str | None:
        """The ARN of the cluster Autopilot registered under this name: the registry's once known, else
        (a create before its first event) DescribeCluster's; None when Autopilot has no such cluster."""
        item = self.dynamodb.get_item(
            TableName=self._table,
            Key={k: {"S": v} for k, v in cluster_key(cluster_name).items()},
            ProjectionExpression="pk, clusterArn",
            ConsistentRead=True,
        ).get("Item")
        if item is None:
            return None
        if "clusterArn" in item:
            return str(item["clusterArn"]["S"])
        try:
            return str(self.sagemaker.describe_cluster(ClusterName=cluster_name)["ClusterArn"])
        except ClientError as exc:
            if _code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return None
            raise

    def record_status(self, cluster_name: str, cluster_arn: str, status: str, version: StatusVersion) -> bool:
        """Set the registry's SageMaker status if this report is newer than the one it holds.

        Only clusters in the registry are updated (clusters created outside Autopilot are not adopted
        by an event). False when the cluster is unknown or the report is not newer.
        """
        try:
            self.dynamodb.update_item(
                TableName=self._table,
                Key={k: {"S": v} for k, v in cluster_key(cluster_name).items()},
                UpdateExpression=(
                    "SET sagemakerStatus = :status, sagemakerStatusVersion = :version, "
                    "clusterArn = if_not_exists(clusterArn, :arn)"
                ),
                ConditionExpression=(
                    "attribute_exists(pk) AND "
                    "(attribute_not_exists(sagemakerStatusVersion) OR sagemakerStatusVersion < :version)"
                ),
                ExpressionAttributeValues={
                    ":status": {"S": status},
                    ":version": {"S": version.key()},
                    ":arn": {"S": cluster_arn},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
