"""What an invocation gets and gives back, shaped as Lambda's: its limits and the sandbox's
credentials, the LambdaContext, the InvocationResult, per-function metrics, throttling, and the
error payload Lambda returns for a failed handler.
"""

from __future__ import annotations

import decimal
import json
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from sandbox.emulator.deploy import FunctionSpec

# A synchronous invocation's response: "6 MB" in Lambda's quotas, 6,291,556 bytes in its error message.
MAX_RESPONSE_BYTES: Final = 6_291_556
# On-demand initialisation gets 10 s on Lambda before the invoke phase retries it within the timeout.
INIT_SECONDS: Final = 10.0
# SQS event-source mappings: the batches Lambda's pollers start with (ScalingConfig's floor is 2).
SQS_POLLERS: Final = 5
# Event (async) invocations of one function running at once: this machine's limit, not Lambda's
EVENT_ENVIRONMENTS: Final = 2

# Host variables that configure AWS SDKs, Powertools or Lambda itself: not in a function's
# environment (it sees Lambda's and its template's values instead). The rest of the host environment
# (PATH, HOME, a test runner's own variables) passes through.
LAMBDA_MANAGED_PREFIXES: Final = ("AWS_", "POWERTOOLS_", "LAMBDA_", "_X_AMZN_", "BOTO_", "_HANDLER")
SANDBOX_CREDENTIALS: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


class _CognitoIdentity:
    cognito_identity_id: str | None = None
    cognito_identity_pool_id: str | None = None


def log_group_name(spec: FunctionSpec) -> str:
    """The function's log group: its LoggingConfig's, else the one Lambda names after it."""
    return spec.log_group_name or f"/aws/lambda/{spec.name}"


class LambdaContext:
    """The context the Python runtime passes (same attributes; memory_limit_in_mb is a str there too)."""

    def __init__(self, spec: FunctionSpec, request_id: str, deadline: float) -> None:
        self.aws_request_id = request_id
        self.function_name = spec.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = spec.arn
        self.memory_limit_in_mb = str(spec.memory_size)
        self.log_group_name = log_group_name(spec)
        self.log_stream_name = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{request_id.replace('-', '')}"
        self.identity = _CognitoIdentity()
        self.client_context: Any = None
        self.tenant_id: str | None = None
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))

    def log(self, message: str) -> None:
        sys.stdout.write(message)


@dataclass(frozen=True)
class InvocationResult:
    """What Lambda's Invoke returns: the payload bytes and, on failure, FunctionError."""

    payload: bytes
    function_error: str | None
    request_id: str
    duration_ms: float

    @property
    def ok(self) -> bool:
        return self.function_error is None

    def json(self) -> Any:
        return json.loads(self.payload) if self.payload else None


@dataclass
class FunctionMetrics:
    invocations: int = 0
    errors: int = 0
    cold_starts: int = 0
    async_invocations: int = 0
    duration_ms: float = 0.0
    timeouts: int = 0
    throttles: int = 0
    concurrent: int = 0  # invocations running now
    peak_concurrent: int = 0  # the most that ever ran at once (Lambda's ConcurrentExecutions maximum)

    def as_dict(self) -> dict[str, Any]:
        return {
            "invocations": self.invocations,
            "errors": self.errors,
            "cold_starts": self.cold_starts,
            "async_invocations": self.async_invocations,
            "duration_ms": round(self.duration_ms, 1),
            "timeouts": self.timeouts,
            "throttles": self.throttles,
            "peak_concurrent_invocations": self.peak_concurrent,
        }


class FunctionThrottled(Exception):
    """An invocation past the function's ReservedConcurrentExecutions: Lambda's 429."""

    error_type: Final = "TooManyRequestsException"
    reason: Final = "ReservedFunctionConcurrentInvocationLimitExceeded"

    def __init__(self, function_name: str) -> None:
        super().__init__("Rate Exceeded.")
        self.function_name = function_name


def payload_bytes(payload: bytes | str | Any) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, default=json_default).encode()


def json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The runtime's own frames (any module of this package) are left out of a handler's stack trace.
_RUNTIME_FILES: Final = frozenset(str(path.resolve()) for path in Path(__file__).parent.glob("*.py"))


def error_payload(
    error_type: str,
    message: str,
    request_id: str,
    *,
    error: BaseException | None = None,
    with_trace: bool = True,
) -> bytes:
    body: dict[str, Any] = {"errorMessage": message, "errorType": error_type, "requestId": request_id}
    if with_trace:
        frames = traceback.extract_tb(error.__traceback__) if error is not None else []
        body["stackTrace"] = traceback.format_list([f for f in frames if f.filename not in _RUNTIME_FILES])
    return json.dumps(body).encode()
