"""Routes of a cluster's nodes and worker groups: list the nodes, scale a group, reboot or replace a node."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from botocore.exceptions import ClientError

from autopilot.api import wiring
from autopilot.api.parameters import CLUSTER_NAME, IDEMPOTENCY_KEY, NODE_ID, caller
from autopilot.api.responses import FOLLOW_OPERATION, responses
from autopilot.errors import (
    InvalidPageTokenError,
)
from autopilot.models.bodies import (
    InstanceGroupScaled,
    NodeList,
    OperationAccepted,
    ScaleInstanceGroupBody,
)
from autopilot.models.records import NodeAction

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)


@router.get(
    "/clusters/<name>/nodes",
    summary="List a cluster's nodes",
    description="One page of ListClusterNodes, each node with Autopilot's `health` (`status`, `reason`, "
    "`since`, from HyperPod's Node Health events and the healing sweep) and the `repair` in flight "
    "(`operationId`, `action`, `status`). A node Autopilot has no report of is `Healthy` as far as "
    "Autopilot knows.",
    tags=["clusters"],
    operation_id="listClusterNodes",
    responses=responses(HTTPStatus.OK, NodeList, "One page of nodes.", HTTPStatus.NOT_FOUND),
)
def list_nodes(
    name: CLUSTER_NAME,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 100,
    next_token: Annotated[
        # SageMaker's NextToken is at most 8192 characters.
        str | None, Query(alias="nextToken", max_length=8192, description="From the previous page")
    ] = None,
) -> NodeList:
    from autopilot.logic import read_nodes  # noqa: PLC0415  (first use)

    try:
        return read_nodes.list_nodes(
            wiring.deps(),
            name,
            limit=limit,
            next_token=next_token,
            caller=caller(router),
        )
    except ClientError as exc:
        # SageMaker refuses a token it did not issue with a ValidationException.
        if next_token and exc.response.get("Error", {}).get("Code") == "ValidationException":
            raise InvalidPageTokenError(next_token) from exc
        raise


@router.put(
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
    responses=responses(
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
    from autopilot.logic.scale_instance_group import scale_instance_group  # noqa: PLC0415  (first use)

    return scale_instance_group(wiring.deps(), name, group, body.instance_count, requested_by=caller(router))


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
    register: Callable[[_RepairRoute], _RepairRoute] = router.post(
        f"/clusters/<name>/nodes/<nodeId>/{action.value}",
        status_code=HTTPStatus.ACCEPTED.value,
        summary=summary,
        description=f"{_REPAIR_DESCRIPTION} {extra}",
        tags=["nodes"],
        operation_id=operation_id,
        responses=responses(
            HTTPStatus.ACCEPTED,
            OperationAccepted,
            "Accepted; follow the repair at GET /operations/{operationId}.",
            HTTPStatus.FORBIDDEN,
            HTTPStatus.NOT_FOUND,
            HTTPStatus.CONFLICT,
            HTTPStatus.UNPROCESSABLE_ENTITY,
            links=FOLLOW_OPERATION,
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
    from autopilot.logic.repair_node import repair_node  # noqa: PLC0415  (first use)

    return repair_node(
        wiring.deps(),
        name,
        node_id,
        action,
        requested_by=caller(router),
        idempotency_key=idempotency_key,
        lambda_context=router.lambda_context,
    )
