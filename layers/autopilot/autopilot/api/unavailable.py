"""Which failures mean "AWS is busy or unreachable, try again later" (503), not a defect (500).

boto3 already retried these (standard mode, see autopilot.aws); one that is still failing is
transient on AWS's side, and the API says so with a 503 and Retry-After instead of a 500.
"""

from __future__ import annotations

from typing import Final

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from autopilot.aws import THROTTLING_CODES

RETRY_AFTER_SECONDS: Final = 5

# DynamoDB cancels a transaction for these per-item reasons; retrying later can succeed.
_TRANSIENT_CANCELLATIONS: Final = frozenset({"ThrottlingError", "TransactionConflict"})


def aws_unavailable(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is AWS throttling, a 5xx or no connection.

    The chain is followed because libraries wrap the botocore error (Powertools idempotency raises
    IdempotencyPersistenceLayerError from the DynamoDB ClientError).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, HTTPClientError | BotocoreConnectionError) or (
            isinstance(current, ClientError) and _transient(current)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def _transient(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    if error.get("Code") in THROTTLING_CODES:
        return True
    if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500:
        return True
    reasons = exc.response.get("CancellationReasons", [])
    return any(reason.get("Code") in _TRANSIENT_CANCELLATIONS for reason in reasons)
