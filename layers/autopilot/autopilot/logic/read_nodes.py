"""GET /clusters/{name}/nodes: SageMaker's page of nodes, each with Autopilot's health view and the
repair in flight.

Health comes from the node items (dal/healing.py) that Node Health events and the sweep write; a node
without an item has had no Unhealthy report Autopilot heard of, so it is shown Healthy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.aws import error_code
from autopilot.errors import NotFoundError
from autopilot.logic.read_access import may_read_live
from autopilot.models.bodies import (
    NodeHealthView,
    NodeList,
    NodeRepairView,
    NodeView,
    SlurmNodeView,
    TargetHealthView,
)
from autopilot.models.records import NodeHealth, NodeRecord
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies
    from autopilot.models.agent import SlurmNode

_NOT_FOUND_CODES = ("ResourceNotFound", "ResourceNotFoundException")


def list_nodes(
    deps: Dependencies, name: str, *, limit: int, next_token: str | None, caller: str | None = None
) -> NodeList:
    if not may_read_live(deps, caller, deps.store.get_cluster(name)):
        raise NotFoundError(f"cluster {name!r} not found")
    kwargs: dict[str, Any] = {"ClusterName": name, "MaxResults": limit}
    if next_token:
        kwargs["NextToken"] = next_token
    try:
        response = deps.sagemaker.list_cluster_nodes(**kwargs)
    except ClientError as exc:
        if error_code(exc) in _NOT_FOUND_CODES:
            raise NotFoundError(f"cluster {name!r} not found") from exc
        raise
    summaries = response.get("ClusterNodeSummaries", [])
    records = {r.node_id: r for r in deps.healing.list_nodes(name)} if summaries else {}
    agent = deps.agents.agent(name) if summaries else None
    slurm = agent.nodes if agent else {}
    balanced = _load_balancer(deps, name) if summaries else {}
    nodes = [
        NodeView.model_validate(
            {
                **summary,
                "health": _health(records.get(summary["InstanceId"])),
                "repair": _repair(deps, records.get(summary["InstanceId"])),
                "slurm": _slurm(slurm, summary.get("PrivateDnsHostname")),
                "loadBalancer": balanced.get(summary["InstanceId"]),
            }
        )
        for summary in summaries
    ]
    return NodeList(nodes=nodes, next_token=response.get("NextToken") or None)


def _load_balancer(deps: Dependencies, name: str) -> dict[str, list[TargetHealthView]]:
    """Instance id -> its target health in each login target group, for the cluster's login nodes."""
    cluster = deps.store.get_cluster(name)
    arns = (cluster.login_target_group_arns if cluster else None) or []
    if not arns:
        return {}
    targets = deps.login_targets
    try:
        ips = targets.login_ips(name)
        ports = {arn: int(g["Port"]) for arn, g in targets.describe_groups(arns).items()}
        health = targets.health(arns)
    except ClientError:
        # the nodes are still worth listing; the health shows again once ELBv2 answers
        logger.warning("login target health not read", cluster=name, exc_info=True)
        return {}
    views: dict[str, list[TargetHealthView]] = {}
    for instance_id, ip in ips.items():
        found = {t["targetGroupArn"]: t for t in health.get(ip, [])}
        views[instance_id] = [
            TargetHealthView.model_validate(
                found.get(arn, {"targetGroupArn": arn, "port": ports.get(arn, 0), "state": "unregistered"})
            )
            for arn in arns
        ]
    return views


def _slurm(reported: Mapping[str, SlurmNode], hostname: str | None) -> SlurmNodeView | None:
    """The node's view in the agent's report: Slurm names a HyperPod node by the first label of its
    PrivateDnsHostname (ip-10-1-2-3)."""
    node = reported.get(hostname.split(".", 1)[0]) if hostname else None
    if node is None:
        return None
    return SlurmNodeView(state=node.state, reason=node.reason, jobs=node.jobs, gpus=node.gpus)


# NodeHealthView's fields are the node record's health fields, named for the API by the view's
# validation aliases (tests/unit/test_records.py holds each to the record's type).
_HEALTH = {"health", "health_reason", "health_since"}


def _health(record: NodeRecord | None) -> NodeHealthView:
    if record is None or record.health is None:
        return NodeHealthView(status=NodeHealth.HEALTHY)  # built per call: no model built at init
    return NodeHealthView.model_validate(record.model_dump(include=_HEALTH))


def _repair(deps: Dependencies, record: NodeRecord | None) -> NodeRepairView | None:
    if record is None or record.open_repair is None:
        return None
    operation = deps.store.get_operation(record.open_repair)
    if operation is None:  # the claim writes both in one transaction; only a hand-deleted item
        return None
    return NodeRepairView(
        operation_id=operation.operation_id,
        action=operation.actions[-1].action if operation.actions else None,
        status=operation.status,
    )
