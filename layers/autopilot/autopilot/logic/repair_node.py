"""POST /clusters/{name}/nodes/{nodeId}/reboot and /replace: an operator's repair, through the same
claim and ReplaceNode workflow as a Node Health event's (logic/healing/start_repair.py).

Only clusters Autopilot manages (registered and ACTIVE), only by the cluster's creator or an admin
(as DELETE), never a replace of the Slurm controller (nor of a login node unless AllowLoginReplace,
and a reboot of either is not escalated to one), never a second repair of a node while one is
open. Healing being paused does not refuse it: the breaker stops automatic repairs, and an operator's
explicit request is the decision the pause waits for.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from autopilot.errors import ConflictError, NotFoundError
from autopilot.logic.authorize_delete import authorize_delete
from autopilot.logic.healing.decide import NodeRole
from autopilot.logic.healing.start_repair import RepairRequest, start_repair
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.bodies import OperationAccepted
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    Fault,
    NodeAction,
    OperationType,
    RepairActor,
    RepairTrigger,
    utc_ms,
)
from autopilot.observability import logger

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from autopilot.logic.dependencies import Dependencies


class ControllerReplaceError(ConflictError):
    """A replace was asked of a Slurm controller node (Autopilot never replaces one)."""


class LoginReplaceError(ConflictError):
    """A replace was asked of a login node while AllowLoginReplace is false (reboot only)."""


def repair_node(
    deps: Dependencies,
    name: str,
    node_id: str,
    action: NodeAction,
    *,
    requested_by: str | None,
    idempotency_key: str | None = None,
    lambda_context: LambdaContext | None = None,
) -> OperationAccepted:
    return deps.once(
        idempotency_key,
        OperationType.REPLACE_NODE,
        {"clusterName": name, "nodeId": node_id, "action": action.value},
        lambda: _repair_node(deps, name, node_id, action, requested_by=requested_by),
        requested_by=requested_by,
        lambda_context=lambda_context,
    )


def managed_cluster(deps: Dependencies, name: str) -> Cluster:
    """The registry's record of a cluster Autopilot manages; NotFoundError for one it does not know
    (or deleted), ConflictError while it is not ACTIVE."""
    cluster = deps.store.get_cluster(name)
    if cluster is None or cluster.status is ClusterStatus.DELETED:
        raise NotFoundError(f"cluster {name!r} not found (Autopilot repairs the clusters it manages)")
    if cluster.status is not ClusterStatus.ACTIVE:
        raise ConflictError(
            f"cluster {name!r} is {cluster.status.value}: Autopilot repairs the nodes of ACTIVE clusters only"
        )
    return cluster


def _repair_node(
    deps: Dependencies, name: str, node_id: str, action: NodeAction, *, requested_by: str | None
) -> OperationAccepted:
    cluster = managed_cluster(deps, name)
    authorize_delete(
        name,
        requested_by,
        cluster.created_by,
        deps.settings.admin_principal_arns,
        action=f"{action.value} nodes of",
        matching=deps.settings.owner_matching,
        owners=cluster.owners,
    )
    topology = TopologyReader(sagemaker=deps.sagemaker)
    group = topology.node_group(name, node_id)
    if group is None:
        raise NotFoundError(f"node {node_id} not found in cluster {name!r}")
    shape = topology.cluster(name)
    if shape is None:
        raise NotFoundError(f"cluster {name!r} not found in SageMaker")
    role = shape.role(group)
    # The same rule as the policy's (logic/healing/decide.py), for the escalation of a reboot too.
    allow_replace = role is NodeRole.WORKER or (
        role is NodeRole.LOGIN and deps.healing_settings.allow_login_replace
    )
    if action is NodeAction.REPLACE and role is NodeRole.CONTROLLER:
        raise ControllerReplaceError(
            f"node {node_id} is the Slurm controller of cluster {name!r} (instance group {group!r}): "
            "Autopilot never replaces a controller; reboot it, or replace it yourself"
        )
    if action is NodeAction.REPLACE and not allow_replace:
        raise LoginReplaceError(
            f"node {node_id} is a login node of cluster {name!r} (instance group {group!r}): "
            "Autopilot only reboots login nodes (AllowLoginReplace=false); reboot it, or replace it yourself"
        )
    now = deps.now()
    # An operator's request is a new fault by definition: it must come after the last fault claimed on
    # the node, whose time is its event's (HyperPod's clock, ahead of this one in the sandbox), or the
    # claim would refuse it as already repaired. Only an open repair refuses it.
    held = deps.healing.get_node(name, node_id)
    if held is not None and held.last_fault_at is not None and held.last_fault_at >= utc_ms(now):
        now = held.last_fault_at + timedelta(milliseconds=1)
    fault = Fault(reason=f"{action.value} requested through the API by {requested_by}", detected_at=now)
    request = RepairRequest(
        cluster_name=name,
        node_id=node_id,
        action=action,
        trigger=RepairTrigger.API,
        fault=fault,
        actor=RepairActor.AUTOPILOT,
        instance_group=group,
        requested_by=requested_by,
        allow_replace=allow_replace,
        deep_health_checks=shape.deep_health_checks(group),
    )
    operation = start_repair(
        request,
        healing=deps.healing,
        stepfunctions=deps.stepfunctions,
        events=deps.events,
        settings=deps.healing_settings,
        now=now,
    )
    if operation is None:
        held = deps.healing.get_node(name, node_id)
        open_repair = held.open_repair if held else None
        raise ConflictError(
            f"node {node_id} of cluster {name!r} has a repair in flight (operation {open_repair}): "
            f"follow it at GET /operations/{open_repair}"
        )
    logger.info("operator repair accepted", cluster=name, node=node_id, action=action.value)
    return OperationAccepted(operation_id=operation.operation_id, cluster_name=name, status=operation.status)
