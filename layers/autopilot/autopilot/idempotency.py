"""``Idempotency-Key`` on POST /clusters and DELETE /clusters/{name}, with Powertools idempotency.

Records live in IdempotencyTable. A caller that retries after a timeout sends the same key and
gets the first answer back (the same 202 and operationId) instead of a 409 or a second operation,
as with Stripe's idempotency keys or an AWS ``ClientToken``. A key belongs to one caller and one
action. What the first request asked for is kept (as a hash) beside its answer, so the same key
with a different request is refused rather than answered with another request's operation. A
request that fails (4xx, 503) is not remembered: its retry runs again. Answers are kept for
EXPIRES_AFTER_SECONDS.

Once the action has recorded its operation, a failure of the bookkeeping after it must not hide the
operation (issue 20, finding 8): an answer the table could not keep is still given, and the operation
carries :func:`request_marker`, by which a retry that meets "in progress" or the operation's own
conflict (the name taken) finds it and answers its operationId.

Powertools' idempotency package is imported when the first request with a key arrives: requests
without one, and the read routes, never pay for it at cold start.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict

from autopilot import aws
from autopilot.observability import logger

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_dynamodb import DynamoDBClient

    from autopilot.dal.state_store import StateStore
    from autopilot.models.bodies import OperationAccepted

HEADER: Final = "Idempotency-Key"
EXPIRES_AFTER_SECONDS: Final = 24 * 60 * 60


class IdempotentRequest(BaseModel):
    """What a retry must repeat: the key, whose it is and for what (the record's id), and the request."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: str
    caller: str | None
    action: str
    request: dict[str, Any]


class IdempotencyKeyReusedError(Exception):
    """The key was used before, by the same caller for the same action, with a different request."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the {HEADER} {key!r} was already used with a different request; "
            f"send a new {HEADER} for a new request"
        )
        self.key = key


class IdempotencyKeyInProgressError(Exception):
    """The first request with this key is still being processed."""

    def __init__(self, key: str) -> None:
        super().__init__(f"a request with the {HEADER} {key!r} is still in progress; retry in a moment")
        self.key = key


def request_marker(request: IdempotentRequest) -> str:
    """``<key digest>:<request digest>``: whose key for which action, and what it asked for. Digests,
    so the record holds neither the key nor a copy of the request."""

    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    return f"{digest([request.caller, request.action, request.key])}:{digest(request.request)}"


def answer_recorded(request: IdempotentRequest, recorded_marker: str | None) -> bool:
    """Whether an operation recorded with ``recorded_marker`` is this request's own (answer it);
    IdempotencyKeyReusedError when it was made with this key for another request."""
    if recorded_marker is None:
        return False
    key, _, _ = recorded_marker.partition(":")
    marker = request_marker(request)
    if recorded_marker == marker:
        return True
    if key == marker.partition(":")[0]:
        raise IdempotencyKeyReusedError(request.key)
    return False


def recorded_answer(
    store: StateStore, cluster_name: str, request: IdempotentRequest
) -> OperationAccepted | None:
    """The answer to ``request`` when the cluster's latest operation is the one it recorded: its first
    attempt got that far and then failed, or its answer was lost (a retry's 409 or 404 would hide it)."""
    cluster = store.get_cluster(cluster_name)
    operation = (
        store.get_operation(cluster.last_operation_id)
        if cluster is not None and cluster.last_operation_id
        else None
    )
    if operation is None or not answer_recorded(request, operation.idempotency):
        return None
    # The API's error table reads this module's errors at init; the bodies come with a write route.
    from autopilot.models.bodies import OperationAccepted  # noqa: PLC0415

    logger.info(
        "retry answered with its operation", cluster=cluster_name, operation_id=operation.operation_id
    )
    return OperationAccepted(
        operation_id=operation.operation_id, cluster_name=cluster_name, status=operation.status
    )


def accept_once(*, request: IdempotentRequest, accept: Callable[[], OperationAccepted]) -> OperationAccepted:
    """Run the action's logic; wrapped by Powertools' idempotent_function (the record id names this)."""
    return accept()


class IdempotentRequests:
    """Runs an accepting action once per (caller, action, key); replays its answer afterwards."""

    def __init__(self, table_name: str, *, client: DynamoDBClient | None = None) -> None:
        # Imported here: only requests that carry an Idempotency-Key need Powertools' idempotency.
        from aws_lambda_powertools.utilities.idempotency import (  # noqa: PLC0415
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )
        from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import (  # noqa: PLC0415
            PydanticSerializer,
        )

        self._config = IdempotencyConfig(
            event_key_jmespath="[caller, action, key]",
            payload_validation_jmespath="request",
            expires_after_seconds=EXPIRES_AFTER_SECONDS,
        )
        from autopilot.models.bodies import OperationAccepted  # noqa: PLC0415  (as recorded_answer)

        store = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client or aws.client("dynamodb"))
        self._accept_once: Callable[..., OperationAccepted] = idempotent_function(
            accept_once,
            data_keyword_argument="request",
            persistence_store=store,
            config=self._config,
            output_serializer=PydanticSerializer(OperationAccepted),
        )

    def run(
        self,
        request: IdempotentRequest,
        accept: Callable[[], OperationAccepted],
        *,
        lambda_context: LambdaContext | None = None,
    ) -> OperationAccepted:
        from aws_lambda_powertools.utilities.idempotency.exceptions import (  # noqa: PLC0415
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
            IdempotencyValidationError,
        )

        if lambda_context is not None:
            # An in-progress record then expires with the invocation, so a retry after a timeout
            # that killed the function runs again instead of meeting "in progress" for a day.
            self._config.register_lambda_context(lambda_context)
        answered: list[OperationAccepted] = []

        def accept_and_keep() -> OperationAccepted:
            answered.append(accept())
            return answered[-1]

        try:
            return self._accept_once(request=request, accept=accept_and_keep)
        except IdempotencyValidationError as exc:
            raise IdempotencyKeyReusedError(request.key) from exc
        except IdempotencyAlreadyInProgressError as exc:
            raise IdempotencyKeyInProgressError(request.key) from exc
        except IdempotencyPersistenceLayerError:
            if not answered:
                raise
            # The operation is accepted; only its answer was not kept (the record stays in progress
            # until it expires, and a retry meanwhile finds the operation by its request_marker).
            logger.warning("idempotency answer not saved", key=request.key, action=request.action)
            return answered[-1]
