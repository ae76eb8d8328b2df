"""Every in-process AWS call, seen before moto answers it: who makes it, and a chance to fail it.

- a ``before-parameter-build`` botocore handler (in ``botocore.handlers.BUILTIN_HANDLERS``, so
  every session and client created afterwards has it, and on boto3's default session) notes the
  operation, its parameters and the caller in the request context;
- :func:`answer`, called by moto's ``BotocoreStubber`` before it dispatches the request (the
  ``intercept_aws_calls`` seam), asks each registered check for an answer; the first error answer
  is returned as the service's own HTTP response, so botocore parses it and retries it as it
  would AWS's, and moto never sees the call. (A separate ``before-send`` handler cannot do this:
  botocore calls every ``before-send`` handler and keeps the first answer, so moto would still
  carry out the call.) A check may instead answer :class:`LostResponse`: then the call is carried
  out first (moto or a simulator does the work) and the caller gets the error, or a read timeout,
  in place of the service's answer.

The caller is the principal of the code making the call: the role of the Lambda function running
on this thread (``sandbox.emulator.invocation.CURRENT_FUNCTION``), or the role a Step Functions client
was created for (the ``bind_execution_role`` seam calls :func:`act_as` on it). Calls with no
principal are the sandbox's own (deploy, simulators, test clients) or an outside client's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from typing import Any, Final

import boto3
import botocore.handlers
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.model import OperationModel, ServiceModel
from moto.awslambda.utils import get_backend as lambda_backend
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeoutError

from sandbox.emulator.invocation import CURRENT_FUNCTION

_CALL: Final = "sandbox_call"
_PRINCIPAL: Final = "sandbox_principal"


@dataclass(frozen=True)
class Principal:
    """Who makes a call: an IAM role, as the session ``session`` assumed it."""

    role_arn: str
    session: str

    @property
    def account(self) -> str:
        return self.role_arn.split(":")[4]

    @property
    def assumed_role_arn(self) -> str:
        role_name = self.role_arn.rsplit("/", 1)[-1]
        return f"arn:aws:sts::{self.account}:assumed-role/{role_name}/{self.session}"


@dataclass(frozen=True)
class Call:
    service_model: ServiceModel
    operation: str
    params: dict[str, Any]
    region: str
    principal: Principal | None

    @property
    def service(self) -> str:
        return self.service_model.service_name


@dataclass(frozen=True)
class Answer:
    """An HTTP answer in the service's own shape (see sandbox.emulator.aws_calls.errors.error_response)."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class LostResponse:
    """The call takes effect, then its answer is lost: the caller gets ``instead`` (a 5xx), or a read
    timeout as botocore raises it when ``instead`` is None."""

    instead: Answer | None


Check = Callable[[Call], Answer | LostResponse | None]

_checks: Final[list[Check]] = []
_lock: Final = threading.Lock()
_active: Final = threading.Event()


def add_check(check: Check) -> None:
    with _lock:
        if check not in _checks:
            _checks.append(check)


def remove_check(check: Check) -> None:
    with _lock:
        if check in _checks:
            _checks.remove(check)


def act_as(client: Any, principal: Principal) -> None:
    """Every call ``client`` makes is made by ``principal`` (a Step Functions execution's role)."""

    def stamp(context: dict[str, Any], **_: Any) -> None:
        context[_PRINCIPAL] = principal

    client.meta.events.register_first("before-parameter-build", stamp)


def _function_principal() -> Principal | None:
    spec = CURRENT_FUNCTION.get()
    if spec is None:
        return None
    parts = spec.arn.split(":")
    function = lambda_backend(parts[4], parts[3]).get_function(spec.arn)
    return Principal(str(function.role), spec.name)


def _note_call(model: OperationModel, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if not _active.is_set():
        return
    context[_CALL] = (model, dict(params))
    if _PRINCIPAL not in context:
        context[_PRINCIPAL] = _function_principal()


def answer(request: AWSPreparedRequest, carry_out: Callable[[], object]) -> AWSResponse | None:
    """The sandbox's answer to an in-process request, or None to let moto answer it. ``carry_out``
    lets moto answer it (its answer discarded): a lost response's call takes effect first."""
    if not _active.is_set():
        return None
    context = getattr(request, "context", None) or {}
    noted = context.get(_CALL)
    if noted is None:
        return None
    model, params = noted
    call = Call(
        model.service_model, model.name, params, str(context.get("client_region")), context.get(_PRINCIPAL)
    )
    with _lock:
        checks = list(_checks)
    for check in checks:
        answered = check(call)
        if isinstance(answered, LostResponse):
            carry_out()
            if answered.instead is None:  # as botocore's URLLib3Session raises it
                raise ReadTimeoutError(
                    endpoint_url=request.url,
                    error=Urllib3ReadTimeoutError(None, request.url, "Read timed out."),  # type: ignore[arg-type]
                )
            answered = answered.instead
        if answered is not None:
            body = _RawBody(answered.body)
            return AWSResponse(request.url, answered.status, answered.headers, body)  # type: ignore[arg-type]
    return None


class _RawBody(BytesIO):
    def stream(self, **_: Any) -> Any:
        yield self.read()


def _register() -> None:
    """Put the call-noting handler in BUILTIN_HANDLERS (once per process) and the default session."""
    handler = ("before-parameter-build", _note_call)
    if handler not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append(handler)
    if boto3.DEFAULT_SESSION is not None:
        events: Any = boto3.DEFAULT_SESSION._session.get_component("event_emitter")
        events.unregister(*handler)
        events.register(*handler)


def activate() -> None:
    _register()
    _active.set()


def deactivate() -> None:
    _active.clear()
    with _lock:
        _checks.clear()
