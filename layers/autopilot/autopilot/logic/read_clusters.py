"""The API's reads: a cluster (Autopilot's record + SageMaker's live view), the cluster list, an
operation (a cluster's nodes: logic/read_nodes.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from autopilot.aws import error_code
from autopilot.errors import NotFoundError
from autopilot.logic.agent.status import agent_state
from autopilot.logic.budget_enforcement import growth_blocked
from autopilot.logic.read_access import is_admin, is_managed, may_read, readable_cluster
from autopilot.logic.read_operations import operation_view
from autopilot.models.bodies import (
    AgentView,
    ClusterList,
    ClusterSummary,
    ClusterView,
    LiveClusterView,
    OperationView,
)
from autopilot.models.records import Cluster

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies

_NOT_FOUND_CODES = ("ResourceNotFound", "ResourceNotFoundException")
# ClusterView's fields taken from the registry as they are (accountBudgets is shown in numbers).
_RECORDED = set(ClusterView.model_fields) & set(Cluster.model_fields) - {"account_budgets"}


def describe_cluster(deps: Dependencies, name: str) -> LiveClusterView | None:
    """SageMaker's view of the cluster; None when SageMaker has no such cluster."""
    try:
        described = deps.sagemaker.describe_cluster(ClusterName=name)
    except ClientError as exc:
        if error_code(exc) in _NOT_FOUND_CODES:
            return None
        raise
    return LiveClusterView.model_validate(described)


def get_cluster(deps: Dependencies, name: str, *, caller: str | None = None) -> ClusterView:
    registered = deps.store.get_cluster(name)
    if registered is not None and not may_read(deps, caller, registered):
        raise NotFoundError(f"cluster {name!r} not found")
    # SageMaker's view of a cluster Autopilot does not manage is the admins' (logic/read_access.py).
    readable_live = is_managed(registered) or is_admin(deps, caller)
    live = describe_cluster(deps, name) if readable_live else None
    if registered is None and live is None:
        raise NotFoundError(f"cluster {name!r} not found")
    # The registry's fields the view shows are the record's own (tests/unit/test_views.py); the rest is
    # computed here, or SageMaker's.
    recorded = registered.model_dump(include=_RECORDED) if registered else {"status": None}
    return ClusterView.model_validate(
        {
            **recorded,
            "cluster_name": name,
            "growth_blocked": registered is not None and growth_blocked(registered, deps.now()),
            "account_budgets": {a: float(usd) for a, usd in registered.account_budgets.items()}
            if registered and registered.account_budgets
            else None,
            "sagemaker": live,
            "history": deps.store.list_history(name) if registered else [],
            "agent": _agent(deps, name),
        }
    )


# AgentView's fields taken from the agent's record, named for the API by the view's validation aliases
# (tests/unit/test_records.py holds each to the record's type); its status is computed from the clock.
_AGENT = {"last_seen", "agent_version"}


def _agent(deps: Dependencies, name: str) -> AgentView:
    record = deps.agents.agent(name)
    return AgentView.model_validate(
        {
            **(record.model_dump(include=_AGENT) if record else {}),
            "status": agent_state(record, deps.now(), deps.settings.agent_poll_seconds),
        }
    )


def list_clusters(
    deps: Dependencies,
    *,
    limit: int,
    next_token: str | None,
    include_deleted: bool,
    caller: str | None = None,
) -> ClusterList:
    page = deps.store.list_clusters(limit=limit, next_token=next_token, include_deleted=include_deleted)
    # The record holds more than the summary shows (enforcement, worker groups, ...). Under
    # ReadAccess=owners a page may hold fewer than ``limit`` (as a DynamoDB filter's page does).
    clusters = [
        ClusterSummary.model_validate(c.model_dump(include=set(ClusterSummary.model_fields)))
        for c in page.items
        if may_read(deps, caller, c)
    ]
    return ClusterList(clusters=clusters, next_token=page.next_token)


def get_operation(deps: Dependencies, operation_id: str, *, caller: str | None = None) -> OperationView:
    operation = deps.store.get_operation(operation_id)
    if operation is not None and deps.settings.read_access == "owners":
        try:
            readable_cluster(deps, operation.cluster_name, caller)
        except NotFoundError:
            operation = None
    if operation is None:
        raise NotFoundError(f"operation {operation_id!r} not found")
    return operation_view(operation)
