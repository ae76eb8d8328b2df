"""The API's error answers: each error a route or Powertools raises, as the HTTP answer it gets.

Every error is JSON ``{"message", "errors"?: [{"path", "message", "file"?, "location"?}]}``; bad input
is a 4xx naming the field or the problem (autopilot.api.body), never a 500; AWS still throttling or
failing after boto3's retries is a 503 with Retry-After (autopilot.api.unavailable).
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
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
from autopilot.models.bodies import ErrorBody, ErrorDetail
from autopilot.observability import logger

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)

_ErrorHandler = Callable[[Any], Response[str]]


def _handles(exc_class: type[Exception]) -> Callable[[_ErrorHandler], _ErrorHandler]:
    """app.exception_handler, typed (Powertools leaves its return type open)."""
    register: Callable[[_ErrorHandler], _ErrorHandler] = router.exception_handler(exc_class)
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
    content_type = unsupported_media_type(router.current_event)
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
    return error_response(HTTPStatus.BAD_REQUEST, ErrorBody(message="the request is invalid", errors=details))


@_handles(UnsupportedMediaTypeError)
def _media_type_refused(exc: UnsupportedMediaTypeError) -> Response[str]:
    return error_response(
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        ErrorBody(
            message=f"the body must be application/json (UTF-8), not {exc.content_type!r}",
            errors=[ErrorDetail(location="header", path="Content-Type", message="unsupported media type")],
        ),
    )


@_handles(RequestUnsupportedContentType)
def _content_type_unknown(exc: RequestUnsupportedContentType) -> Response[str]:
    content_type = router.current_event.headers.get("content-type", "")
    return _media_type_refused(UnsupportedMediaTypeError(content_type))


@_handles(InvalidBodyError)
def _bad_body(exc: InvalidBodyError) -> Response[str]:
    return error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the request is invalid", errors=[ErrorDetail(location="body", path="", message=str(exc))]
        ),
    )


@_handles(BodyTooLargeError)
def _body_too_large(exc: BodyTooLargeError) -> Response[str]:
    return error_response(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, ErrorBody(message=str(exc)))


@_handles(UnicodeDecodeError)
def _undecodable(exc: UnicodeDecodeError) -> Response[str]:
    # Powertools decodes a base64 (binary) body as UTF-8 before parsing it; any other
    # UnicodeDecodeError is a defect.
    if body_is_utf8(router.current_event):
        return _unexpected(exc)
    return _bad_body(InvalidBodyError("the body is not valid UTF-8"))


@_handles(InvalidRequestError)
def _invalid(exc: InvalidRequestError) -> Response[str]:
    return error_response(HTTPStatus.BAD_REQUEST, ErrorBody(message=str(exc), errors=exc.errors))


@_handles(InvalidPageTokenError)
def _bad_token(exc: InvalidPageTokenError) -> Response[str]:
    return error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the nextToken is not one this API issued",
            errors=[ErrorDetail(location="query", path="nextToken", message="invalid page token")],
        ),
    )


@_handles(NotFoundError)
def _not_found(exc: NotFoundError) -> Response[str]:
    return error_response(HTTPStatus.NOT_FOUND, ErrorBody(message=str(exc)))


@_handles(RouteNotFoundError)
def _no_route(exc: RouteNotFoundError) -> Response[str]:
    path = router.current_event.path
    return error_response(HTTPStatus.NOT_FOUND, ErrorBody(message=f"no such resource: {path}"))


@_handles(NotAllowedError)
def _not_allowed(exc: NotAllowedError) -> Response[str]:
    return error_response(HTTPStatus.FORBIDDEN, ErrorBody(message=str(exc)))


@_handles(CallerMayNotUseError)
def _may_not_use(exc: CallerMayNotUseError) -> Response[str]:
    return error_response(HTTPStatus.FORBIDDEN, ErrorBody(message=str(exc), errors=exc.errors))


@_handles(StackRefusedError)
def _stack_refused(exc: StackRefusedError) -> Response[str]:
    return error_response(
        HTTPStatus.BAD_REQUEST,
        ErrorBody(
            message="the stack cannot be deleted with this cluster",
            errors=[ErrorDetail(location="query", path="stackName", message=str(exc))],
        ),
    )


@_handles(ConflictError)
def _conflict(exc: ConflictError) -> Response[str]:
    return error_response(HTTPStatus.CONFLICT, ErrorBody(message=str(exc), errors=exc.errors or None))


@_handles(IdempotencyKeyReusedError)
def _key_reused(exc: IdempotencyKeyReusedError) -> Response[str]:
    return error_response(
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
    return error_response(HTTPStatus.CONFLICT, ErrorBody(message=str(exc)))


@_handles(WorkflowStartError)
def _not_started(exc: WorkflowStartError) -> Response[str]:
    return unavailable(
        ErrorBody(message=f"{exc}; the operation is recorded as FAILED", operationId=exc.operation_id)
    )


@_handles(Exception)
def _unexpected(exc: Exception) -> Response[str]:
    if (refused := _refused_media_type()) is not None:
        return refused
    if aws_unavailable(exc):
        logger.warning("AWS unavailable after retries", exc_info=exc)
        return unavailable(ErrorBody(message="AWS is busy or unavailable; retry later"))
    logger.exception("unhandled error")
    return error_response(HTTPStatus.INTERNAL_SERVER_ERROR, ErrorBody(message="internal error"))
