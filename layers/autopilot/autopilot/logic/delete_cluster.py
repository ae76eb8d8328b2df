"""DELETE /clusters/{name}: authorize, mark the cluster DELETING and start the Cleanup workflow
(statemachines/cleanup_cluster.asl.json). A cluster SageMaker has but the registry does not (created
outside Autopilot) is adopted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.errors import ClusterBusyError, ConflictError, NotFoundError
from autopilot.idempotency import (
    IdempotencyKeyInProgressError,
)
from autopilot.logic.authorize_delete import authorize_delete, check_stack
from autopilot.logic.read_clusters import describe_cluster
from autopilot.models.bodies import OperationAccepted
from autopilot.models.cost_allocation import TAG_CLUSTER_NAME, budget_name_for
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    Operation,
    OperationStatus,
    OperationType,
    new_operation_id,
)
from autopilot.observability import logger
from autopilot.workflows.inputs import CleanupClusterWorkflowInput
from autopilot.workflows.start import start_workflow

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from autopilot.logic.dependencies import Dependencies


def delete_cluster(
    deps: Dependencies,
    name: str,
    *,
    stack_name: str | None,
    requested_by: str | None,
    idempotency_key: str | None = None,
    lambda_context: LambdaContext | None = None,
) -> OperationAccepted:
    # "DELETING", "not found" (the cleanup already ended) or "in progress" may be this key's own first
    # attempt (Dependencies.once_or_recorded)
    return deps.once_or_recorded(
        idempotency_key,
        OperationType.DELETE_CLUSTER,
        {"clusterName": name, "stackName": stack_name},
        lambda marker: _delete_cluster(
            deps, name, stack_name=stack_name, requested_by=requested_by, marker=marker
        ),
        cluster_name=name,
        recorded_on=(ConflictError, NotFoundError, IdempotencyKeyInProgressError),
        requested_by=requested_by,
        lambda_context=lambda_context,
    )


def _delete_cluster(
    deps: Dependencies,
    name: str,
    *,
    stack_name: str | None,
    requested_by: str | None,
    marker: str | None = None,
) -> OperationAccepted:
    registered = deps.store.get_cluster(name)
    live = describe_cluster(deps, name)
    if live is None and (registered is None or registered.status is ClusterStatus.DELETED):
        raise NotFoundError(f"cluster {name!r} not found")
    live_record = registered is not None and registered.status is not ClusterStatus.DELETED
    creator = registered.created_by if registered is not None and live_record else None
    authorize_delete(
        name,
        requested_by,
        creator,
        deps.settings.admin_principal_arns,
        matching=deps.settings.owner_matching,
        owners=registered.owners if registered is not None and live_record else None,
    )
    if registered is not None and registered.status in (ClusterStatus.CREATING, ClusterStatus.DELETING):
        raise ConflictError(
            f"cluster {name!r} is {registered.status.value} (operation {registered.last_operation_id}); "
            "wait for it to finish"
        )
    if stack_name is not None:
        check_stack(
            deps.cloudformation,
            stack_name,
            name,
            own_stack=deps.settings.stack_name,
            tag_key=TAG_CLUSTER_NAME,
        )
    # One "now" for the id and both records (deps.now: the clock module's).
    created = deps.now()
    operation_id = new_operation_id(created)
    operation = Operation(
        operation_id=operation_id,
        operation_type=OperationType.DELETE_CLUSTER,
        cluster_name=name,
        status=OperationStatus.RUNNING,
        created_at=created,
        updated_at=created,
        requested_by=requested_by,
        idempotency=marker,
    )
    adopt = registered is None or registered.status is ClusterStatus.DELETED
    cluster = Cluster(
        cluster_name=name,
        status=ClusterStatus.DELETING,
        created_at=registered.created_at if registered and not adopt else created,
        updated_at=created,
        last_operation_id=operation_id,
        cluster_arn=live.ClusterArn if live else None,
    )
    try:
        deps.store.start_delete(cluster, operation, adopt=adopt)
    except ClusterBusyError as exc:
        raise ConflictError(f"another operation started on cluster {name!r}; try again") from exc
    workflow_input = CleanupClusterWorkflowInput(
        operation_id=operation_id,
        cluster_name=name,
        budget_name=(
            registered.budget_name if registered and registered.budget_name else budget_name_for(name)
        ),
        stack_name=stack_name,
    )
    start_workflow(
        deps,
        deps.settings.cleanup_cluster_state_machine_arn,
        operation,
        workflow_input,
        failed_status=ClusterStatus.DELETE_FAILED,
    )
    logger.info("cluster cleanup accepted", cluster=name, operation_id=operation_id)
    return OperationAccepted(operation_id=operation_id, cluster_name=name, status=OperationStatus.RUNNING)
