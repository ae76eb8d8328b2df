"""IAM enforcement and faults on every AWS call the control plane makes (issue 7, items 4 and 5).

    calls = AwsCalls(sleep_simulated=clock.sleep)               # held by the Sandbox
    calls.start()                                               # after deploy: checks every call
    calls.apply_fault("throttling", {"rate": 0.2, "seed": 7})   # POST /_sandbox/faults
    calls.http_answer(environ, carry_out)                       # faults for serve_aws's HTTP clients

- interception: botocore handlers that see each in-process call and its principal (the role of
  the Lambda function or state machine making it) and can answer it with an error;
- errors: that error as the service's protocol carries it (json, rest-json, query, ec2, rest-xml);
- iam + policy: the call's action, resource and context, evaluated against the role's policies;
- faults: throttling / server_error / latency / lost_response, by rate, service, operation, seed
  and times.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from io import BytesIO
from typing import Any, Final
from urllib.parse import parse_qs

import botocore.session
from botocore.exceptions import UnknownServiceError
from botocore.model import ServiceModel

from sandbox.emulator.aws_calls import interception
from sandbox.emulator.aws_calls.faults import KINDS, FaultPlan, error_answer
from sandbox.emulator.aws_calls.iam import IamEnforcer
from sandbox.emulator.aws_calls.interception import Answer, LostResponse, Principal, act_as

# signing name (the credential scope of a SigV4 request) → botocore service name, where they differ
_SIGNING_TO_SERVICE: Final = {
    "states": "stepfunctions",
    "tagging": "resourcegroupstaggingapi",
    "monitoring": "cloudwatch",
}


class AwsCalls:
    """The sandbox's checks on AWS calls: IAM (when ``enforce_iam``) first, then faults."""

    def __init__(
        self,
        *,
        sleep_simulated: Callable[[float], None],
        enforce_iam: bool = True,
    ) -> None:
        self.faults = FaultPlan(sleep_simulated)
        self.iam = IamEnforcer() if enforce_iam else None

    def start(self) -> None:
        if self.iam is not None:
            interception.add_check(self.iam.check)
        interception.add_check(self.faults.check)

    def stop(self) -> None:
        if self.iam is not None:
            interception.remove_check(self.iam.check)
        interception.remove_check(self.faults.check)

    def apply_fault(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        """Arm a ``throttling`` / ``server_error`` / ``latency`` / ``lost_response`` fault, or ``clear``
        them all."""
        if kind == "clear":
            return self.faults.clear()
        return self.faults.apply(kind, params)

    def http_answer(self, environ: dict[str, Any], carry_out: Callable[[], object]) -> Answer | None:
        """The fault answer for a request to ``serve_aws`` (an outside client), or None.

        The operation is known for json (X-Amz-Target) and query (Action) requests; a rest request
        (Lambda, S3) has none, so only faults without an ``operations`` filter hit it. A lost
        response runs ``carry_out`` (the request served, its answer dropped) and answers the 5xx,
        also for ``answer: "timeout"``: a server cannot time out its client's read short of holding
        the connection for the client's read timeout (botocore's default is 60 s).
        """
        service_model = _service_model(_signing_name(environ))
        if service_model is None:
            return None
        operation = _operation(environ)
        answered = self.faults.answer(service_model, operation, external=True)
        if isinstance(answered, LostResponse):
            carry_out()
            return answered.instead or error_answer(service_model, operation, "server_error")
        return answered


FAULT_KINDS: Final = (*KINDS, "clear")


def _signing_name(environ: dict[str, Any]) -> str | None:
    authorization = str(environ.get("HTTP_AUTHORIZATION", ""))
    marker = "Credential="
    if marker not in authorization:
        return None
    scope = authorization.split(marker, 1)[1].split(",", 1)[0].split("/")
    return scope[3] if len(scope) >= 5 else None


@functools.cache
def _service_model(signing_name: str | None) -> ServiceModel | None:
    if signing_name is None:
        return None
    try:
        return botocore.session.get_session().get_service_model(
            _SIGNING_TO_SERVICE.get(signing_name, signing_name)
        )
    except UnknownServiceError:
        return None


def _operation(environ: dict[str, Any]) -> str | None:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return str(target).rsplit(".", 1)[-1]
    query = parse_qs(str(environ.get("QUERY_STRING", "")))
    if "Action" in query:
        return query["Action"][0]
    if str(environ.get("CONTENT_TYPE", "")).startswith("application/x-www-form-urlencoded"):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = BytesIO(body)  # moto reads it again
        action = parse_qs(body.decode(errors="replace")).get("Action")
        return action[0] if action else None
    return None


__all__ = ["FAULT_KINDS", "AwsCalls", "Principal", "act_as"]
