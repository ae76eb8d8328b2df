"""Lazily created, cached boto3 clients.

Creating a client is not free (a SageMaker client costs ~0.25 s of cold start), so each is made on
first use and reused for the life of the execution environment. Tests inject their own clients or
call ``clients.cache_clear()`` between moto contexts.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final, Self, cast, overload

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

# What AWS answers when it throttles or times out, still so after the SDK's retries: botocore's own
# lists (botocore.retries.standard: ThrottledRetryableChecker, TransientRetryableChecker). The API
# answers 503 with Retry-After for these (api/unavailable.py), the caller checks too.
THROTTLING_CODES: Final = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)

# Standard retry mode: exponential backoff with jitter on throttling and 5xx (botocore's max_attempts
# counts retries: 6 attempts in all).
DEFAULT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})
# ApiFunction answers within API Gateway's 29 s integration timeout, or the caller gets a 504 for a
# request that may still take effect. One call's worst case — 3 attempts of a 2 s connect and a 5 s
# read, plus standard mode's throttling backoff (at most 1 s, then 2 s) — is 24 s; a call still failing
# then is a 503 the client retries with its Idempotency-Key. The defaults (5 attempts, 60 s timeouts)
# could take minutes.
API_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5)
_config = DEFAULT_CONFIG


def use_config(config: Config) -> None:
    """Make every client created from now on use ``config`` (a function's entry point, before any call)."""
    global _config  # noqa: PLW0603  (one setting per execution environment)
    _config = config
    client.cache_clear()


@cache
def client(service: str, region: str | None = None) -> Any:
    """Return the cached boto3 client for ``service`` (typed at call sites with mypy-boto3 stubs)."""
    return boto3.session.Session().client(service, region_name=region, config=_config)  # type: ignore[call-overload]


def error_code(exc: ClientError) -> str:
    """The AWS error code of a failed call (``ResourceNotFound``...), "" when the response has none."""
    return str(exc.response.get("Error", {}).get("Code", ""))


class LazyClient[T]:
    """A class attribute that reads as a boto3 client: the one injected into ``_<name>`` (a
    constructor argument, for tests), else ``client(service)`` made on first read and kept there.

        class Store:
            sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
            def __init__(self, sagemaker: SageMakerClient | None = None) -> None:
                self._sagemaker = sagemaker
    """

    def __init__(self, service: str) -> None:
        self._service = service
        self._slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}"

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> Self | T:
        if instance is None:
            return self
        found = getattr(instance, self._slot, None)
        if found is None:
            found = client(self._service)
            setattr(instance, self._slot, found)
        return cast(T, found)
