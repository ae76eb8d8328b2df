"""The REST API: Powertools routers, one per resource, assembled on one APIGatewayRestResolver.

Request validation comes from the models; each router's module says which routes it holds
(clusters, nodes, spend, operations, healing); autopilot.api.errors says how every error is answered.

The init registers every route with its models (Powertools validates with them and the OpenAPI
document lists them) but imports no use case: each route imports its own (``autopilot.logic.*``) on
its first request, so an execution environment pays for the routes it serves, not for all sixteen
(docs/operations.md, "Cold start"). The use cases' dependencies: ``wiring.deps()``.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from autopilot import __version__
from autopilot.api import clusters, errors, healing, nodes, operations, spend
from autopilot.api.body import UnsupportedMediaTypeError, parse_json, unsupported_media_type
from autopilot.api.wiring import deps
from autopilot.idempotency import HEADER as IDEMPOTENCY_HEADER

__all__ = ["app", "deps", "openapi_document"]

TITLE = "HyperPod Autopilot API"
DESCRIPTION = (
    "Create, inspect and delete SageMaker HyperPod clusters through Autopilot's workflows. "
    "Every request is signed with AWS Signature Version 4 (API Gateway AWS_IAM authorization)."
)

app = APIGatewayRestResolver(enable_validation=True, json_body_deserializer=parse_json)


def _json_bodies_only(resolver: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """415 for a body that is not JSON, also when Powertools' own parsing let it through (it reads
    `application/json-seq` and `charset=latin-1` as JSON, and parses forms and multipart)."""
    content_type = unsupported_media_type(resolver.current_event)
    if content_type is not None:
        raise UnsupportedMediaTypeError(content_type)
    return next_middleware(resolver)


app.use([_json_bodies_only])
# One Router per resource (Powertools' "Split routes with Router"), each in its own module.
for resource in (clusters, nodes, spend, operations, healing):
    app.include_router(resource.router)


def _answer_error(exc: Exception) -> Response[str]:
    return errors.answer(exc, app.current_event)


# Every exception, the framework's included, goes through the one table (autopilot.api.errors).
app.exception_handler(Exception)(_answer_error)


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
    # Request-shape errors come out as 400 ErrorBody (autopilot.api.errors), not Powertools' 422;
    # the 422 that stays is the documented Idempotency-Key reuse. Powertools lower-cases header
    # names; the document spells the header as clients send it.
    for methods in document["paths"].values():
        for operation in methods.values():
            if "HTTPValidationError" in json.dumps(operation["responses"].get("422", {})):
                del operation["responses"]["422"]
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "header" and parameter["name"] == IDEMPOTENCY_HEADER.lower():
                    parameter["name"] = IDEMPOTENCY_HEADER
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    return document
