"""The REST API: Powertools routers, one per resource, assembled on one APIGatewayRestResolver.

Request validation comes from the models; each router's module says which routes it holds
(clusters, nodes, spend, operations, healing); autopilot.api.errors says how every error is answered.

The init imports no router: a resource's router (its module, the models its routes validate and
answer with) is included on the first request for one of its paths (``ROUTER_PATHS``), and each route
imports its use case (``autopilot.logic.*``) on its first request, so an execution environment pays
for the routes it serves, not for all sixteen (docs/operations.md, "Cold start"). The OpenAPI document
includes them all. The use cases' dependencies: ``wiring.deps()``, made on the first request.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware

from autopilot import __version__
from autopilot.api import errors
from autopilot.api.body import UnsupportedMediaTypeError, parse_json, unsupported_media_type
from autopilot.idempotency import HEADER as IDEMPOTENCY_HEADER

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from autopilot.api.wiring import deps

__all__ = ["app", "deps", "openapi_document"]

TITLE = "HyperPod Autopilot API"
DESCRIPTION = (
    "Create, inspect and delete SageMaker HyperPod clusters through Autopilot's workflows. "
    "Every request is signed with AWS Signature Version 4 (API Gateway AWS_IAM authorization)."
)

# Each resource's router (module autopilot.api.<name>) and the paths of its routes, in Powertools'
# rule syntax; the order is the order they are included in for the OpenAPI document. A new route's
# path goes here too (tests/unit/test_api_routers.py holds this to the routers' own rules).
ROUTER_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "clusters": ("/clusters", "/clusters/<name>", "/validate"),
    "nodes": (
        "/clusters/<name>/instance-groups/<group>",
        "/clusters/<name>/nodes",
        "/clusters/<name>/nodes/<nodeId>/reboot",
        "/clusters/<name>/nodes/<nodeId>/replace",
    ),
    "spend": (
        "/clusters/<name>/account-budgets",
        "/clusters/<name>/cost",
        "/clusters/<name>/growth-block",
        "/clusters/<name>/usage",
    ),
    "operations": ("/clusters/<name>/operations", "/operations/<operationId>"),
    "healing": ("/clusters/<name>/healing",),
}


@cache
def _path_pattern(resource: str) -> re.Pattern[str]:
    """A path any of the resource's rules matches (a ``<parameter>`` is one segment, as in Powertools)."""
    rules = (re.sub(r"<\w+>", "[^/]+", rule) for rule in ROUTER_PATHS[resource])
    return re.compile("|".join(f"(?:{rule})" for rule in rules))


def routers_for(path: str) -> list[str]:
    """The resources whose routers serve ``path`` (none: Powertools answers it 404)."""
    return [resource for resource in ROUTER_PATHS if _path_pattern(resource).fullmatch(path)]


class _Resolver(APIGatewayRestResolver):
    """The REST resolver that includes a resource's router on the first request for its paths."""

    def __init__(self) -> None:
        super().__init__(enable_validation=True, json_body_deserializer=parse_json)
        self.included: list[str] = []

    def include(self, resources: list[str]) -> None:
        for resource in resources:
            if resource not in self.included:
                self.include_router(importlib.import_module(f"autopilot.api.{resource}").router)
                self.included.append(resource)

    def resolve(self, event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
        path = event.get("path")
        self.include(routers_for(path) if isinstance(path, str) else [])
        return super().resolve(event, context)


app = _Resolver()


def _json_bodies_only(resolver: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """415 for a body that is not JSON, also when Powertools' own parsing let it through (it reads
    `application/json-seq` and `charset=latin-1` as JSON, and parses forms and multipart)."""
    content_type = unsupported_media_type(resolver.current_event)
    if content_type is not None:
        raise UnsupportedMediaTypeError(content_type)
    return next_middleware(resolver)


app.use([_json_bodies_only])


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

    app.include(list(ROUTER_PATHS))
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


def __getattr__(name: str) -> Any:
    """``routes.deps``: the API's ``wiring.deps``, imported on first use (its dependencies import the
    state table and the records, which the init does not need)."""
    if name == "deps":
        from autopilot.api.wiring import deps  # noqa: PLC0415

        return deps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
