"""The StateStore in memory, for unit tests of the use cases: the state table's rules without DynamoDB
(tests/unit/test_use_cases.py). The DynamoDB expressions themselves are tested on moto (test_state.py).
"""

from __future__ import annotations

from datetime import datetime

from autopilot import clock
from autopilot.dal.state_table import decode_page_token, encode_page_token
from autopilot.errors import ClusterBusyError, ClusterNameTakenError
from autopilot.models.records import (
    DELETABLE_STATUSES,
    REUSABLE_NAME_STATUSES,
    Cluster,
    ClusterStatus,
    HistoryEntry,
    Operation,
    OperationError,
    OperationStatus,
    Page,
    utc_ms,
)


class InMemoryStateStore:
    def __init__(self) -> None:
        self.clusters: dict[str, Cluster] = {}
        self.operations: dict[str, Operation] = {}
        self.history: dict[str, list[HistoryEntry]] = {}

    def _record(self, operation: Operation) -> None:
        self.operations[operation.operation_id] = operation
        entry = HistoryEntry(
            cluster_name=operation.cluster_name,
            at=operation.created_at,
            operation_id=operation.operation_id,
            operation_type=operation.operation_type,
            requested_by=operation.requested_by,
        )
        self.history.setdefault(operation.cluster_name, []).append(entry)

    def start_create(self, cluster: Cluster, operation: Operation) -> None:
        held = self.clusters.get(cluster.cluster_name)
        if held is not None and held.status not in REUSABLE_NAME_STATUSES:
            raise ClusterNameTakenError(cluster.cluster_name)
        self.clusters[cluster.cluster_name] = cluster
        self._record(operation)

    def start_delete(self, cluster: Cluster, operation: Operation, *, adopt: bool) -> None:
        held = self.clusters.get(cluster.cluster_name)
        if adopt:
            if held is not None and held.status is not ClusterStatus.DELETED:
                raise ClusterBusyError(cluster.cluster_name)
            self.clusters[cluster.cluster_name] = cluster
        else:
            if held is None or held.status not in DELETABLE_STATUSES:
                raise ClusterBusyError(cluster.cluster_name)
            self.clusters[cluster.cluster_name] = held.model_copy(
                update={
                    "status": ClusterStatus.DELETING,
                    "last_operation_id": operation.operation_id,
                    "updated_at": operation.created_at,
                }
            )
        self._record(operation)

    def set_execution_arn(self, operation_id: str, execution_arn: str) -> None:
        operation = self.operations[operation_id]
        self.operations[operation_id] = operation.model_copy(
            update={"execution_arn": execution_arn, "updated_at": utc_ms(clock.now())}
        )

    def fail_operation(
        self, operation_id: str, cluster_name: str, cluster_status: ClusterStatus, error: OperationError
    ) -> None:
        now = utc_ms(clock.now())
        operation = self.operations[operation_id]
        self.operations[operation_id] = operation.model_copy(
            update={"status": OperationStatus.FAILED, "error": error, "updated_at": utc_ms(now)}
        )
        cluster = self.clusters[cluster_name]
        self.clusters[cluster_name] = cluster.model_copy(update={"status": cluster_status, "updated_at": now})

    def fail_running_operation(
        self,
        operation: Operation,
        error: OperationError,
        *,
        cluster_status: ClusterStatus,
        sagemaker_status: str | None,
        now: datetime,
    ) -> bool:
        held = self.operations.get(operation.operation_id)
        if held is None or held.status is not OperationStatus.RUNNING:
            return False
        self.operations[operation.operation_id] = held.model_copy(
            update={"status": OperationStatus.FAILED, "error": error, "updated_at": utc_ms(now)}
        )
        cluster = self.clusters.get(operation.cluster_name)
        if cluster is not None and cluster.last_operation_id == operation.operation_id:
            changed = {
                "status": cluster_status,
                "updated_at": utc_ms(now),
                "sagemaker_status": sagemaker_status,
            }
            self.clusters[operation.cluster_name] = cluster.model_copy(update=changed)
        return True

    def list_running_operations(self, *, created_after: datetime) -> list[Operation]:
        start = f"op-{created_after.strftime('%Y%m%d%H%M%S')}"
        return [
            o
            for _, o in sorted(self.operations.items())
            if o.operation_id >= start and o.status is OperationStatus.RUNNING
        ]

    def get_cluster(self, name: str) -> Cluster | None:
        return self.clusters.get(name)

    def get_operation(self, operation_id: str) -> Operation | None:
        return self.operations.get(operation_id)

    def list_clusters(
        self, *, limit: int = 50, next_token: str | None = None, include_deleted: bool = False
    ) -> Page[Cluster]:
        after = decode_page_token(next_token) if next_token else ""
        found = [
            c
            for name, c in sorted(self.clusters.items())
            if name > after and (include_deleted or c.status is not ClusterStatus.DELETED)
        ]
        page = found[:limit]
        more = len(found) > limit
        return Page[Cluster](
            items=page, next_token=encode_page_token(page[-1].cluster_name) if more else None
        )

    def list_history(self, cluster_name: str, *, limit: int = 20) -> list[HistoryEntry]:
        entries = sorted(self.history.get(cluster_name, []), key=lambda e: (e.at, e.operation_id))
        return entries[::-1][:limit]
