"""The REST API's routes on a Powertools APIGatewayRestResolver (request validation from the models).

Every error is JSON ``{"message", "errors"?: [{"path", "message", "file"?, "location"?}]}``; bad input
is a 4xx naming the field or the problem (autopilot.api.body), never a 500; AWS still throttling or
failing after boto3's retries is a 503 with Retry-After (autopilot.api.unavailable).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from http import HTTPStatus
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from botocore.exceptions import ClientError
from pydantic import BaseModel

from autopilot import __version__
from autopilot.api.body import (
    MAX_BODY_BYTES,
    BodyTooLargeError,
    InvalidBodyError,
    UnsupportedMediaTypeError,
    body_is_utf8,
    parse_json,
    unsupported_media_type,
)
from autopilot.api.unavailable import RETRY_AFTER_SECONDS, aws_unavailable
from autopilot.errors import (
    CallerMayNotUseError,
    ConflictError,
    InvalidPageTokenError,
    InvalidRequestError,
    NotFoundError,
    WorkflowStartError,
)
from autopilot.idempotency import (
    EXPIRES_AFTER_SECONDS,
    IdempotencyKeyInProgressError,
    IdempotencyKeyReusedError,
)
from autopilot.idempotency import HEADER as IDEMPOTENCY_HEADER
from autopilot.logic import healing_control, node_health, read_clusters, read_operations
from autopilot.logic.account_budgets import set_account_budgets
from autopilot.logic.authorize_delete import NotAllowedError, StackRefusedError
from autopilot.logic.create_cluster import create_cluster as create_cluster_use_case
from autopilot.logic.create_cluster import plan_create
from autopilot.logic.delete_cluster import delete_cluster as delete_cluster_use_case
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.lift_growth_block import lift_growth_block as lift_growth_block_use_case
from autopilot.logic.read_cost import read_cost
from autopilot.logic.repair_node import repair_node
from autopilot.logic.scale_instance_group import scale_instance_group
from autopilot.logic.usage_report import read_usage
from autopilot.logic.validate_config import validate_config
from autopilot.models.bodies import (
    ClusterList,
    ClusterView,
    CostView,
    CreateClusterBody,
    CreateClusterPlan,
    ErrorBody,
    ErrorDetail,
    GrowthBlockLifted,
    HealingBody,
    HealingView,
    InstanceGroupScaled,
    NodeList,
    OperationAccepted,
    OperationList,
    OperationView,
    ScaleInstanceGroupBody,
    ValidateBody,
    ValidationResult,
)
from autopilot.models.records import NodeAction, OperationType
from autopilot.models.usage import MONTH_PATTERN, AccountBudgetsBody, AccountBudgetsView, UsageBy, UsageView
from autopilot.observability import logger
from autopilot.settings import api_settings

TITLE = "HyperPod Autopilot API"
DESCRIPTION = (
    "Create, inspect and delete SageMaker HyperPod clusters through Autopilot's workflows. "
    "Every request is signed with AWS Signature Version 4 (API Gateway AWS_IAM authorization)."
)
CLUSTER_NAME = Annotated[
    str,
    Path(min_length=1, max_length=63, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", description="Cluster name"),
]
NODE_ID = Annotated[
    str,
    Path(min_length=10, max_length=19, pattern=r"^i-[a-f0-9]{8}(?:[a-f0-9]{9})?$", description="Instance id"),
]
IDEMPOTENCY_KEY = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_HEADER,
        min_length=1,
        max_length=255,
        pattern=r"^[!-~]+$",
        description="Makes a retry safe: the same key with the same request within "
        f"{EXPIRES_AFTER_SECONDS // 3600} h answers as the first request did (same operationId) "
        "instead of starting another operation; the same key with a different request is a 422. "
        "Printable ASCII without spaces, e.g. a UUID.",
    ),
]

app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=parse_json)


def _json_bodies_only(resolver: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """415 for a body that is not JSON, also when Powertools' own parsing let it through (it reads
    `application/json-seq` and `charset=latin-1` as JSON, and parses forms and multipart)."""
    content_type = unsupported_media_type(resolver.current_event)
    if content_type is not None:
        raise UnsupportedMediaTypeError(content_type)
    return next_middleware(resolver)


app.use([_json_bodies_only])


@lru_cache(maxsize=1)
def get_dependencies() -> Dependencies:
    """The use cases' dependencies, one per execution environment (tests: cache_clear())."""
    return Dependencies(api_settings())


def _error_response(
    status: HTTPStatus, body: ErrorBody, headers: dict[str, str] | None = None
) -> Response[str]:
    return Response(
        status_code=status.value,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(by_alias=True, exclude_none=True),
        headers=headers,
    )


def _unavailable(body: ErrorBody) -> Response[str]:
    return _error_response(
        HTTPStatus.SERVICE_UNAVAILABLE, body, headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
    )


# Every route may answer these: the body checks run before the route (a GET with a body too), and
# every route calls AWS.
_ALWAYS = (
    HTTPStatus.BAD_REQUEST,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
    HTTPStatus.SERVICE_UNAVAILABLE,
    HTTPStatus.INTERNAL_SERVER_ERROR,
)
_ERROR_DESCRIPTIONS = {
    HTTPStatus.BAD_REQUEST: "The request is invalid: `errors` names each field or problem.",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: f"The body is over {MAX_BODY_BYTES // 1024} KiB.",
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: "The body is not `application/json` (UTF-8).",
    HTTPStatus.SERVICE_UNAVAILABLE: "AWS is throttling or failing (or the workflow did not start): "
    "retry after `Retry-After` seconds.",
}
_RETRY_AFTER: dict[str, Any] = {
    "description": "Seconds to wait before retrying.",
    "schema": {"type": "integer"},
}


def _responses(
    success: HTTPStatus,
    model: type[BaseModel],
    description: str,
    *errors: HTTPStatus,
    links: dict[str, Any] | None = None,
) -> dict[int, OpenAPIResponse]:
    documented: dict[int, OpenAPIResponse] = {
        success.value: {
            "description": description,
            "content": {content_types.APPLICATION_JSON: {"model": model}},
        }
    }
    if links:
        documented[success.value]["links"] = links
    for code in sorted({*errors, *_ALWAYS}):
        documented[code.value] = {
            "description": _ERROR_DESCRIPTIONS.get(code, code.phrase),
            "content": {content_types.APPLICATION_JSON: {"model": ErrorBody}},
        }
        if code is HTTPStatus.SERVICE_UNAVAILABLE:
            documented[code.value]["headers"] = {"Retry-After": _RETRY_AFTER}  # type: ignore[dict-item]
    # Not the function's answer: the gateway refuses a request line over its limit before routing,
    # with a body of its own (any media type: without one, the generator would document the route's
    # model here).
    documented[HTTPStatus.REQUEST_URI_TOO_LONG.value] = {
        "description": "The URL is over API Gateway's limit (answered by the gateway, not the API).",
        "content": {"*/*": {"schema": {}}},
    }
    return documented


def _link(operation_id: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link: what a client (or a stateful fuzzer) can call next with this answer's values."""
    return {"operationId": operation_id, "parameters": parameters}


_FOLLOW_OPERATION = {"GetOperation": _link("getOperation", operationId="$response.body#/operationId")}
_FOLLOW_CLUSTER = {
    "GetCluster": _link("getCluster", name="$response.body#/clusterName"),
    "ListClusterNodes": _link("listClusterNodes", name="$response.body#/clusterName"),
    "DeleteCluster": _link("deleteCluster", name="$response.body#/clusterName"),
}


def _caller() -> str | None:
    identity = app.current_event.request_context.identity
    return identity.user_arn or identity.caller


# --- routes ---------------------------------------------------------------------------------------


@app.post(
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
    responses=_responses(
        HTTPStatus.ACCEPTED,
        OperationAccepted,
        "Accepted; follow the operation at GET /operations/{operationId}.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.CONFLICT,
        HTTPStatus.UNPROCESSABLE_ENTITY,
        links=_FOLLOW_OPERATION | _FOLLOW_CLUSTER,
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
    if dry_run:
        plan = plan_create(get_dependencies(), body, requested_by=_caller())
        return Response(HTTPStatus.OK.value, content_types.APPLICATION_JSON, plan)
    accepted = create_cluster_use_case(
        get_dependencies(),
        body,
        requested_by=_caller(),
        idempotency_key=idempotency_key,
        lambda_context=app.lambda_context,
    )
    return Response(HTTPStatus.ACCEPTED.value, content_types.APPLICATION_JSON, accepted)


@app.get(
    "/clusters",
    summary="List clusters",
    tags=["clusters"],
    operation_id="listClusters",
    responses=_responses(HTTPStatus.OK, ClusterList, "Registered clusters, by name."),
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
    return read_clusters.list_clusters(
        get_dependencies(),
        limit=limit,
        next_token=next_token,
        include_deleted=include_deleted,
        caller=_caller(),
    )


@app.get(
    "/clusters/<name>",
    summary="Describe a cluster",
    description="Autopilot's record of the cluster, SageMaker's live status and the recent operations.",
    tags=["clusters"],
    operation_id="getCluster",
    responses=_responses(HTTPStatus.OK, ClusterView, "The cluster.", HTTPStatus.NOT_FOUND),
)
def get_cluster(name: CLUSTER_NAME) -> ClusterView:
    return read_clusters.get_cluster(get_dependencies(), name, caller=_caller())


@app.get(
    "/clusters/<name>/nodes",
    summary="List a cluster's nodes",
    description="One page of ListClusterNodes, each node with Autopilot's `health` (`status`, `reason`, "
    "`since`, from HyperPod's Node Health events and the healing sweep) and the `repair` in flight "
    "(`operationId`, `action`, `status`). A node Autopilot has no report of is `Healthy` as far as "
    "Autopilot knows.",
    tags=["clusters"],
    operation_id="listClusterNodes",
    responses=_responses(HTTPStatus.OK, NodeList, "One page of nodes.", HTTPStatus.NOT_FOUND),
)
def list_nodes(
    name: CLUSTER_NAME,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 100,
    next_token: Annotated[
        # SageMaker's NextToken is at most 8192 characters.
        str | None, Query(alias="nextToken", max_length=8192, description="From the previous page")
    ] = None,
) -> NodeList:
    try:
        return node_health.list_nodes(
            get_dependencies(), name, limit=limit, next_token=next_token, caller=_caller()
        )
    except ClientError as exc:
        # SageMaker refuses a token it did not issue with a ValidationException.
        if next_token and exc.response.get("Error", {}).get("Code") == "ValidationException":
            raise InvalidPageTokenError(next_token) from exc
        raise


@app.get(
    "/clusters/<name>/cost",
    summary="A cluster's spend",
    description="Hourly rate, month-to-date spend and forecast to the month's end at on-demand list "
    "prices, as the spend meter last computed them (every SpendMeterMinutes); zeros and `asOf` null "
    "before its first run. An estimate: no discounts, savings plans or reserved capacity, no storage or "
    "data transfer.",
    tags=["clusters"],
    operation_id="getClusterCost",
    responses=_responses(HTTPStatus.OK, CostView, "The cluster's spend.", HTTPStatus.NOT_FOUND),
)
def get_cluster_cost(name: CLUSTER_NAME) -> CostView:
    return read_cost(get_dependencies(), name, caller=_caller())


@app.get(
    "/clusters/<name>/usage",
    summary="What each Slurm account or user spent on a cluster",
    description="One line per Slurm account (`by=account`) or user (`by=user`) of the month's finished jobs, "
    "each priced at the list prices of the nodes it held while it ran (a node's price shared by its GPUs), "
    "as the cluster's Slurm agent reported them; then the capacity no job used: the spend meter's "
    "month-to-date spend of the cluster less the jobs' cost, so the lines add up to the cluster's spend "
    "(`GET /clusters/{name}/cost`). Never negative: when the jobs cost more than the meter counted, "
    "`warnings` says by how much. `month` defaults to the current one (UTC).",
    tags=["clusters"],
    operation_id="getClusterUsage",
    responses=_responses(HTTPStatus.OK, UsageView, "The month's usage.", HTTPStatus.NOT_FOUND),
)
def get_cluster_usage(
    name: CLUSTER_NAME,
    by: Annotated[UsageBy, Query(description="Lines per Slurm account or per user")] = UsageBy.ACCOUNT,
    month: Annotated[
        str | None, Query(pattern=MONTH_PATTERN, description="YYYY-MM (UTC); the current month by default")
    ] = None,
) -> UsageView:
    return read_usage(get_dependencies(), name, by=by, month=month, caller=_caller())


@app.put(
    "/clusters/<name>/account-budgets",
    summary="Set a cluster's department budgets",
    description="Replaces the cluster's budgets per Slurm account (USD a month; `{}` removes them). When an "
    "account's jobs on the cluster (as `GET /clusters/{name}/usage` counts them) cross 50, 80 and 100 % "
    "of its budget in a month, one alert per threshold goes to the alerts topic: the account, its spend "
    "and budget, its top users and the jobs Slurm runs. Allowed to the cluster's creator, its owners and "
    "the stack's AdminPrincipalArns (403 otherwise).",
    tags=["clusters"],
    operation_id="setClusterAccountBudgets",
    responses=_responses(
        HTTPStatus.OK,
        AccountBudgetsView,
        "The cluster's department budgets.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
    ),
)
def put_account_budgets(
    name: CLUSTER_NAME, body: Annotated[AccountBudgetsBody, Body()]
) -> AccountBudgetsView:
    return set_account_budgets(get_dependencies(), name, body.account_budgets, requested_by=_caller())


@app.delete(
    "/clusters/<name>",
    status_code=HTTPStatus.ACCEPTED.value,
    summary="Delete a cluster",
    description="Starts the Cleanup workflow: delete the cluster, its budget, optionally a CloudFormation "
    "stack, and report resources still tagged with the cluster. Allowed to the principal that created "
    "the cluster and to the stack's AdminPrincipalArns (403 otherwise); `stackName` must name a stack "
    "tagged `ClusterName` = the cluster, never Autopilot's own (400 naming `stackName` otherwise).",
    tags=["clusters"],
    operation_id="deleteCluster",
    responses=_responses(
        HTTPStatus.ACCEPTED,
        OperationAccepted,
        "Accepted; follow the operation at GET /operations/{operationId}.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
        HTTPStatus.CONFLICT,
        HTTPStatus.UNPROCESSABLE_ENTITY,
        links=_FOLLOW_OPERATION,
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
    return delete_cluster_use_case(
        get_dependencies(),
        name,
        stack_name=stack_name,
        requested_by=_caller(),
        idempotency_key=idempotency_key,
        lambda_context=app.lambda_context,
    )


@app.delete(
    "/clusters/<name>/growth-block",
    summary="Lift a cluster's growth block",
    description="A cluster whose budget enforcement is `block-growth` refuses scale-ups from 100 % of its "
    "budget (ACTUAL) until the next budget period; an AdminPrincipalArns principal may lift the block "
    "earlier (403 for anyone else). Lifting a cluster that is not blocked changes nothing.",
    tags=["clusters"],
    operation_id="liftGrowthBlock",
    responses=_responses(
        HTTPStatus.OK,
        GrowthBlockLifted,
        "The cluster may grow again.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
    ),
)
def lift_growth_block(name: CLUSTER_NAME) -> GrowthBlockLifted:
    return lift_growth_block_use_case(get_dependencies(), name, caller=_caller())


@app.put(
    "/clusters/<name>/instance-groups/<group>",
    summary="Scale a worker group",
    description="Sets the group's InstanceCount with UpdateCluster (the group re-specified as "
    "DescribeCluster shows it; the other groups untouched) and records a `ScaleInstanceGroup` operation "
    "in the cluster's history; SageMaker resizes asynchronously (follow GET /clusters/{name}). A scale-up "
    "(a count above the group's target count) is refused with a 409 naming the block and its end while "
    "the cluster's growth is blocked (budget enforcement `block-growth`, until the next budget period or "
    "an admin's DELETE /clusters/{name}/growth-block); a scale-down is always allowed. 404 for a cluster "
    "Autopilot does not manage or a group not in it; 409 while the cluster is not ACTIVE, for the Slurm "
    "controller and login groups (worker groups only) and when SageMaker refuses the update (e.g. the "
    "cluster is Updating). Allowed to the cluster's creator and the stack's AdminPrincipalArns (403 "
    "otherwise), as DELETE. Setting the count it has changes nothing (no operation).",
    tags=["clusters"],
    operation_id="scaleInstanceGroup",
    responses=_responses(
        HTTPStatus.OK,
        InstanceGroupScaled,
        "UpdateCluster was asked; every group's target count.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
        HTTPStatus.CONFLICT,
    ),
)
def scale_group(
    name: CLUSTER_NAME,
    group: Annotated[
        str,
        Path(
            min_length=1,
            max_length=63,
            pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$",
            description="Instance group",
        ),
    ],
    body: Annotated[ScaleInstanceGroupBody, Body()],
) -> InstanceGroupScaled:
    return scale_instance_group(get_dependencies(), name, group, body.instance_count, requested_by=_caller())


_REPAIR_DESCRIPTION = (
    "Starts the ReplaceNode workflow for the node, through the same claim and guards as an automatic "
    "repair (trigger `api`): 404 for a cluster Autopilot does not manage or a node not in it, 409 while "
    "the cluster is not ACTIVE or the node has a repair in flight (the message names the operation). "
    "Allowed to the cluster's creator and the stack's AdminPrincipalArns (403 otherwise), as DELETE. "
    "Healing being paused does not refuse it: the pause stops automatic repairs, not an operator's."
)


_RepairRoute = Callable[..., OperationAccepted]


def _repair_route(
    action: NodeAction, operation_id: str, summary: str, extra: str
) -> Callable[[_RepairRoute], _RepairRoute]:
    register: Callable[[_RepairRoute], _RepairRoute] = app.post(
        f"/clusters/<name>/nodes/<nodeId>/{action.value}",
        status_code=HTTPStatus.ACCEPTED.value,
        summary=summary,
        description=f"{_REPAIR_DESCRIPTION} {extra}",
        tags=["nodes"],
        operation_id=operation_id,
        responses=_responses(
            HTTPStatus.ACCEPTED,
            OperationAccepted,
            "Accepted; follow the repair at GET /operations/{operationId}.",
            HTTPStatus.FORBIDDEN,
            HTTPStatus.NOT_FOUND,
            HTTPStatus.CONFLICT,
            HTTPStatus.UNPROCESSABLE_ENTITY,
            links=_FOLLOW_OPERATION,
        ),
    )
    return register


@_repair_route(
    NodeAction.REBOOT,
    "rebootClusterNode",
    "Reboot a node",
    "A reboot that has not healed the node within RebootDeadlineMinutes escalates to a replace "
    "(never for a Slurm controller or, unless AllowLoginReplace, a login node).",
)
def reboot_node(
    name: CLUSTER_NAME, nodeId: NODE_ID, idempotency_key: IDEMPOTENCY_KEY = None
) -> OperationAccepted:
    return _repair(name, nodeId, NodeAction.REBOOT, idempotency_key)


@_repair_route(
    NodeAction.REPLACE,
    "replaceClusterNode",
    "Replace a node",
    "A Slurm controller node is never replaced: 409 naming the node (reboot it instead).",
)
def replace_node(
    name: CLUSTER_NAME, nodeId: NODE_ID, idempotency_key: IDEMPOTENCY_KEY = None
) -> OperationAccepted:
    return _repair(name, nodeId, NodeAction.REPLACE, idempotency_key)


def _repair(name: str, node_id: str, action: NodeAction, idempotency_key: str | None) -> OperationAccepted:
    return repair_node(
        get_dependencies(),
        name,
        node_id,
        action,
        requested_by=_caller(),
        idempotency_key=idempotency_key,
        lambda_context=app.lambda_context,
    )


@app.get(
    "/clusters/<name>/operations",
    summary="List a cluster's operations",
    description="Every operation Autopilot ran on the cluster, newest first: creates, deletes, node "
    "repairs (`ReplaceNode`: the node, the trigger, the fault, each action and its result), budget "
    "enforcement (`ScaleToMin`) and group counts set through the API (`ScaleInstanceGroup`). 404 for a "
    "cluster Autopilot never registered.",
    tags=["operations"],
    operation_id="listClusterOperations",
    responses=_responses(HTTPStatus.OK, OperationList, "One page of operations.", HTTPStatus.NOT_FOUND),
)
def list_operations(
    name: CLUSTER_NAME,
    kind: Annotated[OperationType | None, Query(description="Only operations of this kind")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 50,
    next_token: Annotated[
        str | None, Query(alias="nextToken", max_length=1024, description="From the previous page")
    ] = None,
) -> OperationList:
    return read_operations.list_operations(
        get_dependencies(), name, kind=kind, limit=limit, next_token=next_token, caller=_caller()
    )


@app.get(
    "/clusters/<name>/healing",
    summary="Show a cluster's healing state",
    description="Whether automatic repairs are paused (by the breaker or by hand, when and why), the "
    "breaker's window and threshold, and how many repairs hold a slot of MaxConcurrentRepairs.",
    tags=["healing"],
    operation_id="getClusterHealing",
    responses=_responses(HTTPStatus.OK, HealingView, "The cluster's healing state.", HTTPStatus.NOT_FOUND),
)
def get_healing(name: CLUSTER_NAME) -> HealingView:
    return healing_control.get_healing(get_dependencies(), name, caller=_caller())


@app.put(
    "/clusters/<name>/healing",
    summary="Pause or resume a cluster's automatic repairs",
    description='`{"paused": true}` stops new automatic repairs (events and sweep; repairs already '
    "running finish; an operator's reboot/replace still runs) and records the caller as `pausedBy` and "
    "the optional `reason` as `pausedReason`. "
    '`{"paused": false}` resumes them, clears the breaker\'s window and emits `Healing Resumed`, on '
    "which the healing sweep takes the cluster: nodes left unhealthy meanwhile get their repairs "
    "(MaxConcurrentRepairs at a time) shortly after this answer, which does not wait for them. Setting the "
    "state it already has changes nothing. Allowed to the cluster's creator and the stack's "
    "AdminPrincipalArns (403 otherwise); 409 while the cluster is not ACTIVE.",
    tags=["healing"],
    operation_id="setClusterHealing",
    responses=_responses(
        HTTPStatus.OK,
        HealingView,
        "The cluster's healing state after the change.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
        HTTPStatus.CONFLICT,
    ),
)
def set_healing(name: CLUSTER_NAME, body: Annotated[HealingBody, Body()]) -> HealingView:
    return healing_control.set_healing(
        get_dependencies(), name, paused=body.paused, reason=body.reason, requested_by=_caller()
    )


@app.get(
    "/operations/<operationId>",
    summary="Follow an operation",
    description="Kind, status (RUNNING/SUCCEEDED/FAILED), steps with timestamps, the error and the "
    "Step Functions execution.",
    tags=["operations"],
    operation_id="getOperation",
    responses=_responses(HTTPStatus.OK, OperationView, "The operation.", HTTPStatus.NOT_FOUND),
)
def get_operation(
    operationId: Annotated[str, Path(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_-]+$")],
) -> OperationView:
    return read_clusters.get_operation(get_dependencies(), operationId, caller=_caller())


@app.post(
    "/validate",
    summary="Validate a cluster config",
    description="The same checks as POST /clusters, without creating anything. 200 either way; "
    "`valid` tells.",
    tags=["clusters"],
    operation_id="validateClusterConfig",
    responses=_responses(HTTPStatus.OK, ValidationResult, "Every problem found (valid or not)."),
)
def validate(body: Annotated[ValidateBody, Body()]) -> ValidationResult:
    return validate_config(get_dependencies(), body)


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> dict[str, Any]:
    return openapi_document()


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of this API (docs/openapi.json is generated from it)."""
    # Powertools' OpenAPI models cost ~0.15 s to import and only this route and the generator use them.
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn  # noqa: PLC0415

    document: dict[str, Any] = json.loads(
        app.get_openapi_json_schema(
            title=TITLE,
            version=__version__,
            description=DESCRIPTION,
            security_schemes={
                "sigv4": APIKey(
                    name="Authorization",
                    in_=APIKeyIn.header,
                    description="AWS Signature Version 4 (service execute-api)",
                )
            },
            security=[{"sigv4": []}],
        )
    )
    # Request-shape errors come out as 400 ErrorBody (see _request_invalid), not Powertools' 422;
    # the 422 that stays is the documented Idempotency-Key reuse. Powertools lower-cases header
    # names; the document spells the header as clients send it.
    for operations in document["paths"].values():
        for operation in operations.values():
            if "HTTPValidationError" in json.dumps(operation["responses"].get("422", {})):
                del operation["responses"]["422"]
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "header" and parameter["name"] == IDEMPOTENCY_HEADER.lower():
                    parameter["name"] = IDEMPOTENCY_HEADER
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    return document


# --- errors ---------------------------------------------------------------------------------------

_ErrorHandler = Callable[[Any], Response[str]]


def _handles(exc_class: type[Exception]) -> Callable[[_ErrorHandler], _ErrorHandler]:
    """app.exception_handler, typed (Powertools leaves its return type open)."""
    register: Callable[[_ErrorHandler], _ErrorHandler] = app.exception_handler(exc_class)
    return register


def _loc_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _refused_media_type() -> Response[str] | None:
    """415 when the request has a body that is not JSON.

    Powertools' validation runs before any middleware of ours and parses forms and multipart bodies
    itself, so a body we refuse can fail there first (a validation error, or a ValueError for a
    multipart body without a boundary): its media type, not its fields, is what is wrong.
    """
    content_type = unsupported_media_type(app.current_event)
    return None if content_type is None else _media_type_refused(UnsupportedMediaTypeError(content_type))


@_handles(RequestValidationError)
def _request_invalid(exc: RequestValidationError) -> Response[str]:
    if (refused := _refused_media_type()) is not None:
        return refused
    details = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        location = str(loc[0]) if loc else None
        path = _loc_path(loc[1:])
        if location == "header" and path == IDEMPOTENCY_HEADER.lower():
            path = IDEMPOTENCY_HEADER  # Powertools lower-cases header names
        details.append(ErrorDetail(location=location, path=path, message=str(error.get("msg", "invalid"))))
    return _error_response(
        HTTPStatus.BAD_REQUEST, ErrorBody(message="the request is invalid", errors=details)
    )


@_handles(UnsupportedMediaTypeError)
def _media_type_refused(exc: UnsupportedMediaTypeError) -> Response[str]:
    return _error_response(
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        ErrorBody(
            message=f"the body must be application/json (UTF-8), not {exc.content_type!r}",
            errors=[ErrorDetail(location="header", path="Content-Type", message="unsupported media type")],
        ),
    )


@_handles(RequestUnsupportedContentType)
def _content_type_unknown(exc: RequestUnsupportedContentType) -> Response[str]:
    content_type = app.current_event.headers.get("content-type", "")
    return _media_type_refused(UnsupportedMediaTypeError(content_type))


@_handles(InvalidBodyError)
def _bad_body(exc: InvalidBodyError) -> Response[str]:
    return _error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the request is invalid", errors=[ErrorDetail(location="body", path="", message=str(exc))]
        ),
    )


@_handles(BodyTooLargeError)
def _body_too_large(exc: BodyTooLargeError) -> Response[str]:
    return _error_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, ErrorBody(message=str(exc)))


@_handles(UnicodeDecodeError)
def _undecodable(exc: UnicodeDecodeError) -> Response[str]:
    # Powertools decodes a base64 (binary) body as UTF-8 before parsing it; any other
    # UnicodeDecodeError is a defect.
    if body_is_utf8(app.current_event):
        return _unexpected(exc)
    return _bad_body(InvalidBodyError("the body is not valid UTF-8"))


@_handles(InvalidRequestError)
def _invalid(exc: InvalidRequestError) -> Response[str]:
    return _error_response(HTTPStatus.BAD_REQUEST, ErrorBody(message=str(exc), errors=exc.errors))


@_handles(InvalidPageTokenError)
def _bad_token(exc: InvalidPageTokenError) -> Response[str]:
    return _error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the nextToken is not one this API issued",
            errors=[ErrorDetail(location="query", path="nextToken", message="invalid page token")],
        ),
    )


@_handles(NotFoundError)
def _not_found(exc: NotFoundError) -> Response[str]:
    return _error_response(HTTPStatus.NOT_FOUND, ErrorBody(message=str(exc)))


@_handles(RouteNotFoundError)
def _no_route(exc: RouteNotFoundError) -> Response[str]:
    path = app.current_event.path
    return _error_response(HTTPStatus.NOT_FOUND, ErrorBody(message=f"no such resource: {path}"))


@_handles(NotAllowedError)
def _not_allowed(exc: NotAllowedError) -> Response[str]:
    return _error_response(HTTPStatus.FORBIDDEN, ErrorBody(message=str(exc)))


@_handles(CallerMayNotUseError)
def _may_not_use(exc: CallerMayNotUseError) -> Response[str]:
    return _error_response(HTTPStatus.FORBIDDEN, ErrorBody(message=str(exc), errors=exc.errors))


@_handles(StackRefusedError)
def _stack_refused(exc: StackRefusedError) -> Response[str]:
    return _error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the stack cannot be deleted with this cluster",
            errors=[ErrorDetail(location="query", path="stackName", message=str(exc))],
        ),
    )


@_handles(ConflictError)
def _conflict(exc: ConflictError) -> Response[str]:
    return _error_response(HTTPStatus.CONFLICT, ErrorBody(message=str(exc), errors=exc.errors or None))


@_handles(IdempotencyKeyReusedError)
def _key_reused(exc: IdempotencyKeyReusedError) -> Response[str]:
    return _error_response(
        HTTPStatus.UNPROCESSABLE_ENTITY,
        ErrorBody(
            message=str(exc),
            errors=[
                ErrorDetail(
                    location="header",
                    path=IDEMPOTENCY_HEADER,
                    message="already used with a different request",
                )
            ],
        ),
    )


@_handles(IdempotencyKeyInProgressError)
def _key_in_progress(exc: IdempotencyKeyInProgressError) -> Response[str]:
    return _error_response(HTTPStatus.CONFLICT, ErrorBody(message=str(exc)))


@_handles(WorkflowStartError)
def _not_started(exc: WorkflowStartError) -> Response[str]:
    return _unavailable(
        ErrorBody(message=f"{exc}; the operation is recorded as FAILED", operationId=exc.operation_id)
    )


@_handles(Exception)
def _unexpected(exc: Exception) -> Response[str]:
    if (refused := _refused_media_type()) is not None:
        return refused
    if aws_unavailable(exc):
        logger.warning("AWS unavailable after retries", exc_info=exc)
        return _unavailable(ErrorBody(message="AWS is busy or unavailable; retry later"))
    logger.exception("unhandled error")
    return _error_response(HTTPStatus.INTERNAL_SERVER_ERROR, ErrorBody(message="internal error"))
