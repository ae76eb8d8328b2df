"""PUT /clusters/{name}/instance-groups/{group}: set one worker group's instance count (UpdateCluster).

Only clusters Autopilot manages (registered and ACTIVE), only by the cluster's creator or an admin (as
DELETE), only worker groups: the Slurm controller and login groups (the record's ``workerGroups``
leaves them out, decided at create time) stay as created. A scale-up (a count above the group's
target count) is refused while the cluster's growth is blocked (budget enforcement ``block-growth``,
logic/budget_enforcement.py); a scale-down never is. The group is re-specified whole as
DescribeCluster shows it but for its count (logic/instance_group_spec.py, as scale-to-min does), and
the request is recorded as a ScaleInstanceGroup operation in the cluster's history. On a classic
cluster it is RUNNING until HyperPod reports the update over: ClusterEventsFunction then ends it
SUCCEEDED, or FAILED with the diagnosis of the instances that did not come up (logic/launch_watch.py).
A Continuous cluster stays InService and launches in the background, retrying what fails: the request
is SUCCEEDED once SageMaker took it, each failed launch is alerted on its own (Node Launch Failed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.errors import ConflictError, InvalidRequestError, NotFoundError
from autopilot.logic.authorize_delete import authorize_delete
from autopilot.logic.budget_enforcement import ensure_growth_allowed, target_count
from autopilot.logic.instance_group_spec import group_spec
from autopilot.logic.repair_node import managed_cluster
from autopilot.models.bodies import InstanceGroupScaled
from autopilot.models.error_body import ErrorDetail
from autopilot.models.records import Operation, OperationStatus, OperationType, Step, new_operation_id
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies

# SageMaker's refusals of an UpdateCluster that are the cluster's state, not a fault: a 409 that says why
# (e.g. "cluster is in Updating state", a quota or capacity limit).
_REFUSALS = frozenset({"ValidationException", "ConflictException", "ResourceLimitExceeded"})


class NotAWorkerGroupError(ConflictError):
    """The group is the Slurm controller's or the login nodes' (Autopilot scales worker groups only)."""


def _ensure_within_cap(deps: Dependencies, name: str, total: int) -> None:
    """A scale-up may not take the cluster past MaxInstancesPerCluster (the cap a create is held to)."""
    cap = deps.settings.max_instances_per_cluster
    if total > cap:
        raise InvalidRequestError(
            f"cluster {name!r} would have {total} instances",
            [
                ErrorDetail(
                    path="instanceCount",
                    location="body",
                    message=f"would take cluster {name!r} to {total} instances; this Autopilot stack "
                    f"allows at most {cap} per cluster (MaxInstancesPerCluster)",
                )
            ],
        )


def scale_instance_group(
    deps: Dependencies,
    name: str,
    group: str,
    instance_count: int,
    *,
    requested_by: str | None,
    table: BudgetAlertTable | None = None,
) -> InstanceGroupScaled:
    cluster = managed_cluster(deps, name)
    authorize_delete(
        name,
        requested_by,
        cluster.created_by,
        deps.settings.admin_principal_arns,
        action="scale instance groups of",
        matching=deps.settings.owner_matching,
        owners=cluster.owners,
    )
    described = deps.sagemaker.describe_cluster(ClusterName=name)
    groups: dict[str, Any] = {g["InstanceGroupName"]: g for g in described.get("InstanceGroups") or []}
    if group not in groups:
        raise NotFoundError(f"instance group {group!r} not found in cluster {name!r}")
    if group not in (cluster.worker_groups or []):
        raise NotAWorkerGroupError(
            f"instance group {group!r} of cluster {name!r} is not a worker group (the Slurm controller or "
            "login nodes): Autopilot scales worker groups only"
        )
    previous = target_count(groups[group])
    now = deps.now()
    counts = {g: target_count(spec) for g, spec in groups.items()}
    if instance_count > previous:
        ensure_growth_allowed(cluster, now)
        _ensure_within_cap(deps, name, sum(counts.values()) - previous + instance_count)
    if instance_count == previous:
        return InstanceGroupScaled(
            cluster_name=name,
            instance_group=group,
            previous_count=previous,
            instance_count=instance_count,
            target_counts=counts,
        )
    try:
        deps.sagemaker.update_cluster(
            ClusterName=name,
            InstanceGroups=[group_spec(groups[group], instance_count)],  # type: ignore[list-item]  # DescribeCluster's shapes
        )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in _REFUSALS:
            raise ConflictError(
                f"SageMaker refused to scale instance group {group!r} of cluster {name!r}: "
                f"{error.get('Code')}: {error.get('Message')}"
            ) from exc
        raise
    # createdAt: the time before the call (the launches it caused are the group's instances launched since)
    continuous = described.get("NodeProvisioningMode") == "Continuous"
    operation = Operation(
        operation_id=new_operation_id(now),
        operation_type=OperationType.SCALE_INSTANCE_GROUP,
        cluster_name=name,
        status=OperationStatus.SUCCEEDED if continuous else OperationStatus.RUNNING,
        created_at=now,
        updated_at=deps.now(),
        requested_by=requested_by,
        steps=[Step(name=f"Update Cluster: {group} {previous} -> {instance_count}", entered_at=now)],
        instance_group=group,
        instance_count=instance_count,
    )
    (table or BudgetAlertTable(deps.settings.state_table_name)).record_operation(operation)
    logger.info("instance group scaled", cluster=name, group=group, previous=previous, count=instance_count)
    return InstanceGroupScaled(
        cluster_name=name,
        instance_group=group,
        previous_count=previous,
        instance_count=instance_count,
        operation_id=operation.operation_id,
        target_counts=counts | {group: instance_count},
    )
