"""Routes of what Autopilot did: a cluster's operations, and one operation followed by its id."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from autopilot.api import wiring
from autopilot.api.parameters import CLUSTER_NAME, caller
from autopilot.api.responses import responses
from autopilot.models.bodies import (
    OperationList,
    OperationView,
)
from autopilot.models.records import OperationType

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)


@router.get(
    "/clusters/<name>/operations",
    summary="List a cluster's operations",
    description="Every operation Autopilot ran on the cluster, newest first: creates, deletes, node "
    "repairs (`ReplaceNode`: the node, the trigger, the fault, each action and its result), budget "
    "enforcement (`ScaleToMin`) and group counts set through the API (`ScaleInstanceGroup`). 404 for a "
    "cluster Autopilot never registered.",
    tags=["operations"],
    operation_id="listClusterOperations",
    responses=responses(HTTPStatus.OK, OperationList, "One page of operations.", HTTPStatus.NOT_FOUND),
)
def list_operations(
    name: CLUSTER_NAME,
    kind: Annotated[OperationType | None, Query(description="Only operations of this kind")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Page size")] = 50,
    next_token: Annotated[
        str | None, Query(alias="nextToken", max_length=1024, description="From the previous page")
    ] = None,
) -> OperationList:
    from autopilot.logic import read_operations  # noqa: PLC0415  (first use)

    return read_operations.list_operations(
        wiring.deps(),
        name,
        kind=kind,
        limit=limit,
        next_token=next_token,
        caller=caller(router),
    )


@router.get(
    "/operations/<operationId>",
    summary="Follow an operation",
    description="Kind, status (RUNNING/SUCCEEDED/FAILED), steps with timestamps, the error and the "
    "Step Functions execution.",
    tags=["operations"],
    operation_id="getOperation",
    responses=responses(HTTPStatus.OK, OperationView, "The operation.", HTTPStatus.NOT_FOUND),
)
def get_operation(
    operationId: Annotated[str, Path(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_-]+$")],
) -> OperationView:
    from autopilot.logic import read_clusters  # noqa: PLC0415  (first use)

    return read_clusters.get_operation(wiring.deps(), operationId, caller=caller(router))
