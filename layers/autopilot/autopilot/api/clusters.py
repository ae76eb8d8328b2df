"""Routes of the clusters themselves: create (or plan), list, describe, delete, and validate a config."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from autopilot.api import wiring
from autopilot.api.parameters import CLUSTER_NAME, IDEMPOTENCY_KEY, caller
from autopilot.api.responses import FOLLOW_CLUSTER, FOLLOW_OPERATION, responses
from autopilot.models.bodies import (
    ClusterList,
    ClusterView,
    CreateClusterBody,
    CreateClusterPlan,
    OperationAccepted,
    ValidateBody,
    ValidationResult,
)

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)


@router.post(
    "/clusters",
    status_code=HTTPStatus.ACCEPTED.value,
    summary="Create a cluster",
    description="Validates the config, registers the cluster and starts the Create workflow. With "
    "`dryRun=true`, makes every check a create makes and answers 200 with the CreateCluster request, "
    "cost tags and budgets it would use; nothing is registered or created. Autopilot uses only what its "
    "caller may use (docs/security.md): a role the caller may not pass itself (`iam:PassRole`) is a 403 "
    "naming the field, unless the caller is one of the stack's AdminPrincipalArns; a lifecycle bucket, "
    "subnet or security group of another account or outside the cluster's VPC, or an EKS cluster not in "
    "the stack's EksClusterNames, a 400.",
    tags=["clusters"],
    operation_id="createCluster",
    responses=responses(
        HTTPStatus.ACCEPTED,
        OperationAccepted,
        "Accepted; follow the operation at GET /operations/{operationId}.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.CONFLICT,
        HTTPStatus.UNPROCESSABLE_ENTITY,
        links=FOLLOW_OPERATION | FOLLOW_CLUSTER,
    )
    | {
        HTTPStatus.OK.value: {
            "description": "`dryRun=true`: what the create would do, every check passed.",
            "content": {content_types.APPLICATION_JSON: {"model": CreateClusterPlan}},
        }
    },
)
def create_cluster(
    body: Annotated[CreateClusterBody, Body()],
    idempotency_key: IDEMPOTENCY_KEY = None,
    dry_run: Annotated[
        bool, Query(alias="dryRun", description="Check and show the create; create nothing")
    ] = False,
) -> Response[OperationAccepted | CreateClusterPlan]:
    from autopilot.logic import create_cluster as use_case  # noqa: PLC0415  (first use)

    if dry_run:
        plan = use_case.plan_create(wiring.deps(), body, requested_by=caller(router))
        return Response(HTTPStatus.OK.value, content_types.APPLICATION_JSON, plan)
    accepted = use_case.create_cluster(
        wiring.deps(),
        body,
        requested_by=caller(router),
        idempotency_key=idempotency_key,
        lambda_context=router.lambda_context,
    )
    return Response(HTTPStatus.ACCEPTED.value, content_types.APPLICATION_JSON, accepted)


@router.get(
    "/clusters",
    summary="List clusters",
    tags=["clusters"],
    operation_id="listClusters",
    responses=responses(HTTPStatus.OK, ClusterList, "Registered clusters, by name."),
)
def list_clusters(
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 50,
    next_token: Annotated[
        str | None, Query(alias="nextToken", max_length=1024, description="From the previous page")
    ] = None,
    include_deleted: Annotated[
        bool, Query(alias="includeDeleted", description="Also list deleted clusters")
    ] = False,
) -> ClusterList:
    from autopilot.logic import read_clusters  # noqa: PLC0415  (first use)

    return read_clusters.list_clusters(
        wiring.deps(),
        limit=limit,
        next_token=next_token,
        include_deleted=include_deleted,
        caller=caller(router),
    )


@router.get(
    "/clusters/<name>",
    summary="Describe a cluster",
    description="Autopilot's record of the cluster, SageMaker's live status and the recent operations.",
    tags=["clusters"],
    operation_id="getCluster",
    responses=responses(HTTPStatus.OK, ClusterView, "The cluster.", HTTPStatus.NOT_FOUND),
)
def get_cluster(name: CLUSTER_NAME) -> ClusterView:
    from autopilot.logic import read_clusters  # noqa: PLC0415  (first use)

    return read_clusters.get_cluster(wiring.deps(), name, caller=caller(router))


@router.delete(
    "/clusters/<name>",
    status_code=HTTPStatus.ACCEPTED.value,
    summary="Delete a cluster",
    description="Starts the Cleanup workflow: delete the cluster, its budget, optionally a CloudFormation "
    "stack, and report resources still tagged with the cluster. Allowed to the principal that created "
    "the cluster and to the stack's AdminPrincipalArns (403 otherwise); `stackName` must name a stack "
    "tagged `ClusterName` = the cluster, never Autopilot's own (400 naming `stackName` otherwise).",
    tags=["clusters"],
    operation_id="deleteCluster",
    responses=responses(
        HTTPStatus.ACCEPTED,
        OperationAccepted,
        "Accepted; follow the operation at GET /operations/{operationId}.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
        HTTPStatus.CONFLICT,
        HTTPStatus.UNPROCESSABLE_ENTITY,
        links=FOLLOW_OPERATION,
    ),
)
def delete_cluster(
    name: CLUSTER_NAME,
    stack_name: Annotated[
        str | None,
        Query(
            alias="stackName",
            min_length=1,
            max_length=128,
            pattern=r"^[a-zA-Z][-a-zA-Z0-9]*$",
            description="A CloudFormation stack to delete once the cluster is gone (e.g. its VPC/FSx stack)",
        ),
    ] = None,
    idempotency_key: IDEMPOTENCY_KEY = None,
) -> OperationAccepted:
    from autopilot.logic import delete_cluster as use_case  # noqa: PLC0415  (first use)

    return use_case.delete_cluster(
        wiring.deps(),
        name,
        stack_name=stack_name,
        requested_by=caller(router),
        idempotency_key=idempotency_key,
        lambda_context=router.lambda_context,
    )


@router.post(
    "/validate",
    summary="Validate a cluster config",
    description="The same checks as POST /clusters, without creating anything. 200 either way; "
    "`valid` tells.",
    tags=["clusters"],
    operation_id="validateClusterConfig",
    responses=responses(HTTPStatus.OK, ValidationResult, "Every problem found (valid or not)."),
)
def validate(body: Annotated[ValidateBody, Body()]) -> ValidationResult:
    from autopilot.logic.validate_config import validate_config  # noqa: PLC0415  (first use)

    return validate_config(wiring.deps(), body)
