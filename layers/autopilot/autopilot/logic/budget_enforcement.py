"""Budget enforcement rules shared by the create path, BudgetAlertsFunction and the API.

- Which instance groups ``scale-to-min`` may shrink: every group except the Slurm controller and
  login groups (SlurmConfig.NodeType, else provisioning-parameters.json's controller_group /
  login_group). Decided at create time from the request and kept on the cluster record.
- The minimum of a worker group: its ``MinInstanceCount`` (DescribeCluster's ``MinCount``) when the
  config sets one, else 0. HyperPod's MinInstanceCount only gates the group's first InService, so it
  is the configured floor, not a HyperPod guarantee; 0 stops every worker node's charges.
- The UpdateCluster request names only the worker groups (a group left out is left as it is); it
  never names ``InstanceGroupsToDelete`` and touches no file system.
- ``block-growth``: :func:`ensure_growth_allowed` is the check every path that raises a group's
  InstanceCount must call first (PUT /clusters/{name}/instance-groups/{group}, logic/scale_instance_group.py);
  an admin lifts it with DELETE /clusters/{name}/growth-block (logic/lift_growth_block.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot.errors import ConflictError
from autopilot.logic.instance_group_spec import group_spec
from autopilot.models.records import Cluster, iso

if TYPE_CHECKING:
    from autopilot_config.models.cluster_config import CreateClusterRequest
    from autopilot_config.models.provisioning import ProvisioningParameters


class GrowthBlockedError(ConflictError):
    """The cluster's budget is spent and its enforcement is block-growth: no scale-up."""


def worker_groups(config: CreateClusterRequest, provisioning: ProvisioningParameters | None) -> list[str]:
    """The instance groups that are neither the Slurm controller nor the login group."""
    reserved = {provisioning.controller_group, provisioning.login_group} if provisioning else set()
    return [
        group.InstanceGroupName
        for group in config.InstanceGroups or []
        if (group.SlurmConfig is None or group.SlurmConfig.NodeType not in ("Controller", "Login"))
        and group.InstanceGroupName not in reserved
    ]


def scale_to_min_groups(
    described: Mapping[str, Any], workers: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """The UpdateCluster InstanceGroups that bring each worker group above its minimum down to it,
    and group -> [target count now, minimum]."""
    specs: list[dict[str, Any]] = []
    counts: dict[str, list[int]] = {}
    for group in described.get("InstanceGroups") or []:
        name = group.get("InstanceGroupName")
        if name not in workers:
            continue
        minimum = int(group.get("MinCount") or 0)
        target = target_count(group)
        counts[name] = [target, min(target, minimum)]
        if target <= minimum:
            continue
        specs.append(group_spec(group, minimum))
    return specs, counts


def target_count(group: Mapping[str, Any]) -> int:
    """The instance count a DescribeCluster group is heading for (its current count before HyperPod
    reports a target)."""
    return int(group.get("TargetCount", group.get("CurrentCount", 0)) or 0)


def growth_blocked(cluster: Cluster, now: datetime) -> bool:
    until = cluster.growth_blocked_until
    return until is not None and until > now


def ensure_growth_allowed(cluster: Cluster, now: datetime) -> None:
    """Raise GrowthBlockedError while the cluster's growth is blocked (a 409 from the API)."""
    until = cluster.growth_blocked_until
    if until is not None and growth_blocked(cluster, now):
        raise GrowthBlockedError(
            f"cluster {cluster.cluster_name!r} may not grow: its budget is spent (block-growth) until "
            f"{iso(until)}; an admin may lift it with DELETE "
            f"/clusters/{cluster.cluster_name}/growth-block"
        )
