"""The API's error answers: one table from each error a route (or Powertools) raises to its HTTP status
and how its body is built; routes.py hands every exception to ``answer``.

Every error is JSON ``{"message", "errors"?: [{"path", "message", "file"?, "location"?}]}``; bad input
is a 4xx naming the field or the problem (autopilot.api.body), never a 500; AWS still throttling or
failing after boto3's retries is a 503 with Retry-After (autopilot.api.unavailable), as is every 503.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)

from autopilot.api.body import (
    BodyTooLargeError,
    InvalidBodyError,
    UnsupportedMediaTypeError,
    body_is_utf8,
    unsupported_media_type,
)
from autopilot.api.responses import error_response, unavailable
from autopilot.api.unavailable import aws_unavailable
from autopilot.errors import (
    CallerMayNotUseError,
    ConflictError,
    InvalidPageTokenError,
    InvalidRequestError,
    NotFoundError,
    WorkflowStartError,
)
from autopilot.idempotency import HEADER as IDEMPOTENCY_HEADER
from autopilot.idempotency import IdempotencyKeyInProgressError, IdempotencyKeyReusedError
from autopilot.logic.authorize_delete import NotAllowedError, StackRefusedError
from autopilot.models.error_body import ErrorBody, ErrorDetail
from autopilot.observability import logger

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import Response
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

# How an error's body is built: from the error and, for a few, the request it failed.
BodyOf = Callable[[Any, "APIGatewayProxyEvent"], ErrorBody]


def _message(exc: Exception, _: APIGatewayProxyEvent) -> ErrorBody:
    return ErrorBody(message=str(exc))


def _message_and_errors(
    exc: InvalidRequestError | CallerMayNotUseError, _: APIGatewayProxyEvent
) -> ErrorBody:
    return ErrorBody(message=str(exc), errors=exc.errors)


def _conflict(exc: ConflictError, _: APIGatewayProxyEvent) -> ErrorBody:
    return ErrorBody(message=str(exc), errors=exc.errors or None)


def _invalid(location: str, path: str, message: str) -> ErrorBody:
    return ErrorBody(
        message="the request is invalid", errors=[ErrorDetail(location=location, path=path, message=message)]
    )


def _loc_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def _fields_invalid(exc: RequestValidationError, _: APIGatewayProxyEvent) -> ErrorBody:
    details = []
    for error in exc.errors():
        loc = tuple(error.get("loc", ()))
        location = str(loc[0]) if loc else None
        path = _loc_path(loc[1:])
        if location == "header" and path == IDEMPOTENCY_HEADER.lower():
            path = IDEMPOTENCY_HEADER  # Powertools lower-cases header names
        details.append(ErrorDetail(location=location, path=path, message=str(error.get("msg", "invalid"))))
    return ErrorBody(message="the request is invalid", errors=details)


def _media_type(exc: UnsupportedMediaTypeError, _: APIGatewayProxyEvent) -> ErrorBody:
    return ErrorBody(
        message=f"the body must be application/json (UTF-8), not {exc.content_type!r}",
        errors=[ErrorDetail(location="header", path="Content-Type", message="unsupported media type")],
    )


# The one table: an error (or its nearest base class in it) → its status and its body. Every 503 also
# carries Retry-After. An error not in it is a 503 when AWS is unavailable, else a 500 (``answer``).
ANSWERS: dict[type[Exception], tuple[HTTPStatus, BodyOf]] = {
    # The request itself (autopilot.api.body and Powertools' validation and routing).
    RequestValidationError: (HTTPStatus.BAD_REQUEST, _fields_invalid),
    InvalidBodyError: (HTTPStatus.BAD_REQUEST, lambda exc, _: _invalid("body", "", str(exc))),
    BodyTooLargeError: (HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _message),
    UnsupportedMediaTypeError: (HTTPStatus.UNSUPPORTED_MEDIA_TYPE, _media_type),
    RouteNotFoundError: (
        HTTPStatus.NOT_FOUND,
        lambda _, event: ErrorBody(message=f"no such resource: {event.path}"),
    ),
    IdempotencyKeyReusedError: (
        HTTPStatus.UNPROCESSABLE_ENTITY,
        lambda exc, _: ErrorBody(
            message=str(exc),
            errors=[
                ErrorDetail(
                    location="header",
                    path=IDEMPOTENCY_HEADER,
                    message="already used with a different request",
                )
            ],
        ),
    ),
    IdempotencyKeyInProgressError: (HTTPStatus.CONFLICT, _message),
    # What the use cases refuse (autopilot.errors, autopilot.logic.authorize_delete).
    InvalidRequestError: (HTTPStatus.BAD_REQUEST, _message_and_errors),
    InvalidPageTokenError: (
        HTTPStatus.BAD_REQUEST,
        lambda _, __: ErrorBody(
            message="the nextToken is not one this API issued",
            errors=[ErrorDetail(location="query", path="nextToken", message="invalid page token")],
        ),
    ),
    StackRefusedError: (
        HTTPStatus.BAD_REQUEST,
        lambda exc, _: ErrorBody(
            message="the stack cannot be deleted with this cluster",
            errors=[ErrorDetail(location="query", path="stackName", message=str(exc))],
        ),
    ),
    NotAllowedError: (HTTPStatus.FORBIDDEN, _message),
    CallerMayNotUseError: (HTTPStatus.FORBIDDEN, _message_and_errors),
    NotFoundError: (HTTPStatus.NOT_FOUND, _message),
    ConflictError: (HTTPStatus.CONFLICT, _conflict),
    WorkflowStartError: (
        HTTPStatus.SERVICE_UNAVAILABLE,
        lambda exc, _: ErrorBody(
            message=f"{exc}; the operation is recorded as FAILED", operationId=exc.operation_id
        ),
    ),
}


def _in_table(exc: Exception) -> tuple[HTTPStatus, BodyOf] | None:
    return next((ANSWERS[cls] for cls in type(exc).__mro__ if cls in ANSWERS), None)


def _what_failed(exc: Exception, event: APIGatewayProxyEvent) -> Exception:
    """The error to answer for, which is not always the one raised.

    Powertools' validation runs before any middleware of ours and parses forms and multipart bodies
    itself, so a body we refuse can fail there first (a validation error, or a ValueError for a
    multipart body without a boundary): its media type, not its fields, is what is wrong. Powertools
    also decodes a base64 (binary) body as UTF-8 before parsing it; any other UnicodeDecodeError is a
    defect.
    """
    if isinstance(exc, RequestUnsupportedContentType):
        return UnsupportedMediaTypeError(event.headers.get("content-type", ""))
    if isinstance(exc, UnicodeDecodeError) and not body_is_utf8(event):
        return InvalidBodyError("the body is not valid UTF-8")
    if isinstance(exc, RequestValidationError) or _in_table(exc) is None:
        content_type = unsupported_media_type(event)
        if content_type is not None:
            return UnsupportedMediaTypeError(content_type)
    return exc


def answer(exc: Exception, event: APIGatewayProxyEvent) -> Response[str]:
    """The HTTP answer to an exception raised while serving ``event``."""
    failed = _what_failed(exc, event)
    known = _in_table(failed)
    if known is not None:
        status, body_of = known
        body = body_of(failed, event)
        return unavailable(body) if status is HTTPStatus.SERVICE_UNAVAILABLE else error_response(status, body)
    if aws_unavailable(exc):
        logger.warning("AWS unavailable after retries", exc_info=exc)
        return unavailable(ErrorBody(message="AWS is busy or unavailable; retry later"))
    logger.exception("unhandled error")
    return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, ErrorBody(message="internal error"))
