"""What the use cases need from the state store (the DynamoDB state table, or InMemoryStateStore)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime

    from autopilot.models.records import Cluster, ClusterStatus, HistoryEntry, Operation, OperationError, Page


class StateStore(Protocol):
    def start_create(self, cluster: Cluster, operation: Operation) -> None:
        """Register a new cluster and its CreateCluster operation, atomically; ClusterNameTakenError
        when the name belongs to a cluster that still exists."""

    def start_delete(self, cluster: Cluster, operation: Operation, *, adopt: bool) -> None:
        """Mark the cluster DELETING (``adopt``: register it first) and record its DeleteCluster
        operation, atomically; ClusterBusyError when another operation holds the cluster."""

    def set_execution_arn(self, operation_id: str, execution_arn: str) -> None: ...

    def fail_operation(
        self, operation_id: str, cluster_name: str, cluster_status: ClusterStatus, error: OperationError
    ) -> None:
        """Record that an operation failed before its workflow could."""

    def fail_running_operation(
        self,
        operation: Operation,
        error: OperationError,
        *,
        cluster_status: ClusterStatus,
        sagemaker_status: str | None,
        now: datetime,
    ) -> bool:
        """Record FAILED for a RUNNING operation (the cluster only while it holds it); False if final."""

    def list_running_operations(self, *, created_after: datetime) -> list[Operation]: ...

    def get_cluster(self, name: str) -> Cluster | None: ...

    def get_operation(self, operation_id: str) -> Operation | None: ...

    def list_clusters(
        self, *, limit: int = 50, next_token: str | None = None, include_deleted: bool = False
    ) -> Page[Cluster]:
        """Clusters in name order, ``limit`` a page; InvalidPageTokenError for a token not issued."""

    def list_history(self, cluster_name: str, *, limit: int = 20) -> list[HistoryEntry]:
        """The cluster's most recent operations, newest first."""


def every_cluster(
    store: StateStore, *, page_size: int = 100, include_deleted: bool = False
) -> Iterator[Cluster]:
    """Every registered cluster (the deleted too with ``include_deleted``), in name order, a page at a
    time."""
    token: str | None = None
    while True:
        page = store.list_clusters(limit=page_size, next_token=token, include_deleted=include_deleted)
        yield from page.items
        token = page.next_token
        if token is None:
            return
