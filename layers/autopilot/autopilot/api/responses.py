"""The API's answers as the routers document them (OpenAPI responses and links) and as errors are sent."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from autopilot.api.body import MAX_BODY_BYTES
from autopilot.api.unavailable import RETRY_AFTER_SECONDS
from autopilot.models.error_body import ErrorBody


def error_response(
    status: HTTPStatus, body: ErrorBody, headers: dict[str, str] | None = None
) -> Response[str]:
    return Response(
        status_code=status.value,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(by_alias=True, exclude_none=True),
        headers=headers,
    )


def unavailable(body: ErrorBody) -> Response[str]:
    return error_response(
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


def responses(
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


FOLLOW_OPERATION = {"GetOperation": _link("getOperation", operationId="$response.body#/operationId")}
FOLLOW_CLUSTER = {
    "GetCluster": _link("getCluster", name="$response.body#/clusterName"),
    "ListClusterNodes": _link("listClusterNodes", name="$response.body#/clusterName"),
    "DeleteCluster": _link("deleteCluster", name="$response.body#/clusterName"),
}
