"""AWS errors on the wire: status, headers and body as each protocol carries them.

botocore parses these exactly as it parses AWS's answers, so the caller gets the modeled exception
class when the service models the error (``client.exceptions.ThrottlingException``), a plain
``ClientError`` otherwise, and its retry handler retries what it would retry on AWS.

Which code a service answers for throttling, a server fault or a denied call is in ``_CODES``
(from the botocore models' modeled errors and each service's "common errors" page; the rows
marked unverified in docs/sandbox.md are the services' documented names, not observed answers).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Final, Literal
from xml.sax.saxutils import escape

from botocore.model import ServiceModel

ErrorKind = Literal["throttling", "server_error", "access_denied"]


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    message: str


_THROTTLED: Final = "Rate exceeded"
_INTERNAL: Final = "We encountered an internal error. Please try again."

# service (botocore name) → kind → the code and status that service answers.
_CODES: Final[dict[str, dict[ErrorKind, ErrorCode]]] = {
    "dynamodb": {
        # item operations throttle with ProvisionedThroughputExceededException (see _DYNAMODB_ITEM_OPS)
        "throttling": ErrorCode("ThrottlingException", 400, _THROTTLED),
        "server_error": ErrorCode("InternalServerError", 500, "Internal server error"),
    },
    "stepfunctions": {
        "throttling": ErrorCode("ThrottlingException", 400, _THROTTLED),
        "server_error": ErrorCode("InternalFailure", 500, _INTERNAL),
    },
    "sagemaker": {
        "throttling": ErrorCode("ThrottlingException", 400, _THROTTLED),
        "server_error": ErrorCode("InternalFailure", 500, _INTERNAL),
    },
    "events": {"server_error": ErrorCode("InternalException", 500, _INTERNAL)},
    "budgets": {"server_error": ErrorCode("InternalErrorException", 500, _INTERNAL)},
    "pricing": {"server_error": ErrorCode("InternalErrorException", 500, _INTERNAL)},
    "resourcegroupstaggingapi": {
        "throttling": ErrorCode("ThrottledException", 400, _THROTTLED),
        "server_error": ErrorCode("InternalServiceException", 500, _INTERNAL),
    },
    "sns": {
        "throttling": ErrorCode("Throttled", 429, _THROTTLED),
        "server_error": ErrorCode("InternalError", 500, _INTERNAL),
        "access_denied": ErrorCode("AuthorizationError", 403, ""),
    },
    "sqs": {
        "throttling": ErrorCode("RequestThrottled", 400, _THROTTLED),
        "server_error": ErrorCode("InternalError", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDenied", 403, ""),
    },
    "lambda": {
        "throttling": ErrorCode("TooManyRequestsException", 429, "Rate Exceeded."),
        "server_error": ErrorCode("ServiceException", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDeniedException", 403, ""),
    },
    "s3": {
        "throttling": ErrorCode("SlowDown", 503, "Please reduce your request rate."),
        "server_error": ErrorCode("InternalError", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDenied", 403, "Access Denied"),
    },
}

_DYNAMODB_ITEM_OPS: Final = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
_PROVISIONED: Final = ErrorCode(
    "ProvisionedThroughputExceededException",
    400,
    "The level of configured provisioned throughput for the table was exceeded. "
    "Consider increasing your provisioning level with the UpdateTable API.",
)

# What a service not in _CODES answers, by protocol (AWS's common errors for that protocol family).
_DEFAULTS: Final[dict[str, dict[ErrorKind, ErrorCode]]] = {
    "json": {
        "throttling": ErrorCode("ThrottlingException", 400, _THROTTLED),
        "server_error": ErrorCode("InternalFailure", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDeniedException", 400, ""),
    },
    "rest-json": {
        "throttling": ErrorCode("ThrottlingException", 429, _THROTTLED),
        "server_error": ErrorCode("InternalFailure", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDeniedException", 403, ""),
    },
    "query": {
        "throttling": ErrorCode("Throttling", 400, _THROTTLED),
        "server_error": ErrorCode("InternalFailure", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDenied", 403, ""),
    },
    "ec2": {
        "throttling": ErrorCode("RequestLimitExceeded", 503, "Request limit exceeded."),
        "server_error": ErrorCode("InternalError", 500, _INTERNAL),
        "access_denied": ErrorCode("UnauthorizedOperation", 403, ""),
    },
    "rest-xml": {
        "throttling": ErrorCode("SlowDown", 503, "Please reduce your request rate."),
        "server_error": ErrorCode("InternalError", 500, _INTERNAL),
        "access_denied": ErrorCode("AccessDenied", 403, "Access Denied"),
    },
}


def error_code(service_model: ServiceModel, operation: str, kind: ErrorKind) -> ErrorCode:
    """The code, status and default message ``service_model``'s service answers for ``kind``."""
    service = service_model.service_name
    if service == "dynamodb" and kind == "throttling" and operation in _DYNAMODB_ITEM_OPS:
        return _PROVISIONED
    known = _CODES.get(service, {}).get(kind)
    if known is not None:
        return known
    protocol = service_model.resolved_protocol
    defaults = _DEFAULTS.get(protocol)
    if defaults is None:
        raise NotImplementedError(f"the sandbox cannot shape {protocol} errors ({service})")
    return defaults[kind]


def error_response(
    service_model: ServiceModel, error: ErrorCode, message: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of ``error`` as ``service_model``'s protocol carries it."""
    text = error.message if message is None else message
    request_id = str(uuid.uuid4())
    protocol = service_model.resolved_protocol
    headers = {"x-amzn-RequestId": request_id}
    if protocol == "json":
        version = service_model.metadata.get("jsonVersion", "1.0")
        headers["Content-Type"] = f"application/x-amz-json-{version}"
        if service_model.metadata.get("awsQueryCompatible") is not None:
            fault = "Receiver" if error.status >= 500 else "Sender"
            headers["x-amzn-query-error"] = f"{error.code};{fault}"
        return error.status, headers, json.dumps({"__type": error.code, "message": text}).encode()
    if protocol == "rest-json":
        headers["Content-Type"] = "application/json"
        headers["x-amzn-ErrorType"] = error.code
        kind = "Service" if error.status >= 500 else "User"
        return error.status, headers, json.dumps({"Type": kind, "message": text}).encode()
    code, message = escape(error.code), escape(text)
    if protocol == "query":
        namespace = service_model.metadata.get("xmlNamespace", "")
        fault = "Receiver" if error.status >= 500 else "Sender"
        body = (
            f'<ErrorResponse xmlns="{namespace}"><Error><Type>{fault}</Type><Code>{code}</Code>'
            f"<Message>{message}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
    elif protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
    elif protocol == "rest-xml":
        headers = {"x-amz-request-id": request_id}
        body = (
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<RequestId>{request_id}</RequestId></Error>"
        )
    else:
        raise NotImplementedError(
            f"the sandbox cannot shape {protocol} errors ({service_model.service_name})"
        )
    headers["Content-Type"] = "text/xml"
    return error.status, headers, f'<?xml version="1.0" encoding="UTF-8"?>\n{body}'.encode()
