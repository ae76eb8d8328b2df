"""The API's reads of operations: a cluster's operations newest first, and how one is shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.logic.read_access import readable_cluster
from autopilot.models.bodies import OperationErrorView, OperationList, OperationView

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies
    from autopilot.models.records import Operation, OperationType


def operation_view(operation: Operation) -> OperationView:
    """GET /operations/{id} and each item of GET /clusters/{name}/operations."""
    return OperationView(
        operation_id=operation.operation_id,
        kind=operation.operation_type,
        cluster_name=operation.cluster_name,
        status=operation.status,
        created_at=operation.created_at,
        updated_at=operation.updated_at,
        requested_by=operation.requested_by,
        execution_arn=operation.execution_arn,
        steps=operation.steps,
        error=OperationErrorView(**operation.error.model_dump()) if operation.error else None,
        leftovers=operation.leftovers,
        cluster_arn=operation.cluster_arn,
        rolled_back=operation.rolled_back,
        warnings=operation.warnings,
        diagnosis=operation.diagnosis,
        node_id=operation.node_id,
        trigger=operation.trigger,
        fault=operation.fault,
        actor=operation.actor,
        actions=operation.actions,
        successor_node_id=operation.successor_node_id,
    )


def list_operations(
    deps: Dependencies,
    name: str,
    *,
    kind: OperationType | None,
    limit: int,
    next_token: str | None,
    caller: str | None = None,
) -> OperationList:
    """The cluster's operations newest first; 404 for a cluster Autopilot never registered (a cluster
    it did not create has no operations until it is adopted)."""
    readable_cluster(deps, name, caller)
    page = deps.history.list_operations(name, kind=kind, limit=limit, next_token=next_token)
    return OperationList(operations=[operation_view(o) for o in page.items], next_token=page.next_token)
