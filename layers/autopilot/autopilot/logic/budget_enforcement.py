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
  InstanceCount must call first (PUT /clusters/{name}/instance-groups/{group}, logic/scale_instance_group.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot.api.models import GrowthBlockLifted
from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.errors import ConflictError, NotFoundError
from autopilot.logic.authorize_delete import NotAllowedError, principal, split_arns
from autopilot.models.records import Cluster

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies

# ClusterInstanceGroupDetails members that UpdateCluster's ClusterInstanceGroupSpecification takes with
# the same shape (botocore's sagemaker model): a group is re-specified as DescribeCluster shows it.
SPEC_MEMBERS = (
    "InstanceGroupName",
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "ThreadsPerCore",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "TrainingPlanArn",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "CapacityRequirements",
)


class GrowthBlockedError(ConflictError):
    """The cluster's budget is spent and its enforcement is block-growth: no scale-up."""


def worker_groups(cluster_config: Mapping[str, Any], provisioning: Mapping[str, Any] | None) -> list[str]:
    """The instance groups that are neither the Slurm controller nor the login group."""
    provisioning = provisioning or {}
    reserved = {provisioning.get("controller_group"), provisioning.get("login_group")}
    found: list[str] = []
    for group in cluster_config.get("InstanceGroups") or []:
        if not isinstance(group, Mapping):
            continue
        node_type = (group.get("SlurmConfig") or {}).get("NodeType")
        name = group.get("InstanceGroupName")
        if isinstance(name, str) and node_type not in ("Controller", "Login") and name not in reserved:
            found.append(name)
    return found


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


def group_spec(group: Mapping[str, Any], instance_count: int) -> dict[str, Any]:
    """UpdateCluster's ClusterInstanceGroupSpecification of a DescribeCluster group, as it is but for
    its InstanceCount (scale-to-min and PUT /clusters/{name}/instance-groups/{group})."""
    spec = {k: group[k] for k in SPEC_MEMBERS if k in group}
    spec["InstanceCount"] = instance_count
    if "MinCount" in group:
        spec["MinInstanceCount"] = int(group["MinCount"])
    return spec


def growth_blocked(cluster: Cluster, now: datetime) -> bool:
    until = cluster.growth_blocked_until
    return until is not None and datetime.fromisoformat(until) > now


def ensure_growth_allowed(cluster: Cluster, now: datetime) -> None:
    """Raise GrowthBlockedError while the cluster's growth is blocked (a 409 from the API)."""
    if growth_blocked(cluster, now):
        raise GrowthBlockedError(
            f"cluster {cluster.cluster_name!r} may not grow: its budget is spent (block-growth) until "
            f"{cluster.growth_blocked_until}; an admin may lift it with DELETE "
            f"/clusters/{cluster.cluster_name}/growth-block"
        )


def lift_growth_block(
    deps: Dependencies, name: str, *, caller: str | None, table: BudgetAlertTable | None = None
) -> GrowthBlockLifted:
    """DELETE /clusters/{name}/growth-block: an AdminPrincipalArns principal lets the cluster grow again
    before the budget period ends (403 for anyone else; 404 for a cluster Autopilot does not know)."""
    cluster = deps.store.get_cluster(name)
    if cluster is None:
        raise NotFoundError(f"cluster {name!r} not found")
    admins = {principal(arn) for arn in split_arns(deps.settings.admin_principal_arns)}
    if caller is None or principal(caller) not in admins:
        raise NotAllowedError(
            f"{caller or 'an unidentified caller'} may not lift the growth block of cluster {name!r}: "
            "only the stack's AdminPrincipalArns may"
        )
    was_blocked = growth_blocked(cluster, deps.now())
    (table or BudgetAlertTable(deps.settings.state_table_name)).lift_growth_block(name)
    return GrowthBlockLifted(cluster_name=name, growth_blocked=False, was_blocked=was_blocked)
