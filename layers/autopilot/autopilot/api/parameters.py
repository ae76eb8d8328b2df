"""What the routers share about a request: the path and header parameters, and who is asking."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

from aws_lambda_powertools.event_handler.openapi.params import Header, Path

from autopilot.idempotency import EXPIRES_AFTER_SECONDS
from autopilot.idempotency import HEADER as IDEMPOTENCY_HEADER

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Router
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

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


def caller(router: Router) -> str | None:
    """The signed-in principal (API Gateway AWS_IAM authorization): its ARN, else its caller id."""
    # Every router is included in the REST resolver (autopilot.api.routes), whose events are these.
    event = cast("APIGatewayProxyEvent", router.current_event)
    identity = event.request_context.identity
    return identity.user_arn or identity.caller
