"""The API's reads of operations: a cluster's operations newest first, and how one is shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.logic.read_access import readable_cluster
from autopilot.models.bodies import OperationList, OperationView

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies
    from autopilot.models.records import Operation, OperationType


# The operation's fields the API shows, by the record's names: the view is the record's projection
# (tests/unit/test_views.py holds every one to the record's type), only ``operationType`` is ``kind``.
_SHOWN = set(OperationView.model_fields) - {"kind"}


def operation_view(operation: Operation) -> OperationView:
    """GET /operations/{id} and each item of GET /clusters/{name}/operations."""
    return OperationView.model_validate(
        {**operation.model_dump(include=_SHOWN), "kind": operation.operation_type}
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
