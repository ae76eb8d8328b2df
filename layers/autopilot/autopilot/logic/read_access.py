"""Who may read a cluster through the API (docs/security.md, "Callers").

A cluster Autopilot does not manage (no record, or a record of a cluster it deleted) is the stack's
AdminPrincipalArns' to read: anyone else allowed to invoke the API would otherwise learn, through
Autopilot's role, what SageMaker holds beyond their own permissions. A cluster it manages is
everyone's to read under ``ReadAccess=all`` and its creator's, owners' and admins' under
``ReadAccess=owners``. Whoever may not read a cluster gets the same 404 as for a cluster that does
not exist, so the API does not confirm a name to them either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.errors import NotFoundError
from autopilot.logic.callers import acts_as_any
from autopilot.models.records import Cluster, ClusterStatus

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies


def is_admin(deps: Dependencies, caller: str | None) -> bool:
    settings = deps.settings
    return acts_as_any(caller, settings.admin_principal_arns, matching=settings.owner_matching)


def is_managed(cluster: Cluster | None) -> bool:
    return cluster is not None and cluster.status is not ClusterStatus.DELETED


def may_read(deps: Dependencies, caller: str | None, cluster: Cluster) -> bool:
    """Whether ``caller`` may read the record (history, cost, operations) of ``cluster``."""
    settings = deps.settings
    if settings.read_access == "all":
        return True
    listed = [
        *settings.admin_principal_arns,
        *([cluster.created_by] if cluster.created_by else []),
        *(cluster.owners or []),
    ]
    return acts_as_any(caller, listed, matching=settings.owner_matching)


def readable_cluster(deps: Dependencies, name: str, caller: str | None) -> Cluster:
    """The record of cluster ``name``; NotFoundError when there is none or ``caller`` may not read it."""
    cluster = deps.store.get_cluster(name)
    if cluster is None or not may_read(deps, caller, cluster):
        raise NotFoundError(f"cluster {name!r} not found")
    return cluster


def may_read_live(deps: Dependencies, caller: str | None, cluster: Cluster | None) -> bool:
    """Whether ``caller`` may read SageMaker's own view (DescribeCluster, ListClusterNodes) of the
    cluster whose record is ``cluster`` (None: Autopilot has none)."""
    if cluster is not None and is_managed(cluster):
        return may_read(deps, caller, cluster)
    return is_admin(deps, caller)
