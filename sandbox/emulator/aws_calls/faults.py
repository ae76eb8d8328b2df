"""Faults on any AWS call: ``throttling``, ``server_error``, ``latency`` and ``lost_response``.

Each fault has ``rate`` (share of the matching calls it hits, decided by a ``seed``-ed RNG so a
run can be replayed), optional ``services`` (botocore names: ``dynamodb``, ``stepfunctions``,
``sagemaker``…) and ``operations`` (``UpdateItem``…) filters, and ``times`` (how many calls it
hits at most). By default a fault hits only the control plane's calls (a Lambda function's or a
state machine's); ``external: true`` adds the sandbox's own clients and HTTP clients of
``serve_aws``. ``latency`` delays a call by ``ms`` wall milliseconds, or sandbox-clock
milliseconds with ``clock: "simulated"`` (at speed 600, 600 simulated ms are 1 wall ms while nothing
else works: the delayed caller waits on AWS, so its own work does not hold the clock back).
``lost_response`` lets the call take effect (moto or a simulator carries it out) and then loses
its answer: the caller gets the service's internal error (``answer: "server_error"``, the default,
the code ``server_error`` answers) or a read timeout as botocore raises it (``answer: "timeout"``),
as when AWS did the work but the response never made it back. A retry then meets what the first
attempt did (a second CreateCluster gets ``ResourceInUse``).

Errors are shaped as the service returns them (sandbox.emulator.aws_calls.errors): botocore retries the
throttling codes and 5xx statuses itself, as it does on AWS, so a Lambda function's client sees
a fault only when it hits every attempt (``rate: 1`` or ``times`` ≥ its attempts).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from botocore.model import ServiceModel

from sandbox.emulator.aws_calls.errors import error_code, error_response
from sandbox.emulator.aws_calls.interception import Answer, Call, LostResponse

FaultKind = Literal["throttling", "server_error", "latency", "lost_response"]
KINDS: Final[tuple[FaultKind, ...]] = ("throttling", "server_error", "latency", "lost_response")
LostAnswer = Literal["server_error", "timeout"]


@dataclass
class Fault:
    kind: FaultKind
    rate: float
    services: frozenset[str] | None = None
    operations: frozenset[str] | None = None
    seed: int = 0
    times: int | None = None
    external: bool = False
    ms: float = 0.0
    clock: Literal["wall", "simulated"] = "wall"
    answer: LostAnswer = "server_error"
    hits: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"{self.kind} rate must be between 0 and 1")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1")
        if self.kind == "latency" and self.ms <= 0:
            raise ValueError("latency needs ms > 0")
        if self.clock not in ("wall", "simulated"):
            raise ValueError('clock must be "wall" or "simulated"')
        if self.answer not in ("server_error", "timeout"):
            raise ValueError('answer must be "server_error" or "timeout"')
        self._rng = random.Random(self.seed)

    def hits_call(self, service: str, operation: str | None, external: bool) -> bool:
        """Whether this fault hits the call (consumes one draw of the RNG for every matching call)."""
        if external and not self.external:
            return False
        if self.services is not None and service not in self.services:
            return False
        if self.operations is not None and operation not in self.operations:
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        if self._rng.random() >= self.rate:
            return False
        self.hits += 1
        return True

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "fault": self.kind,
            "rate": self.rate,
            "services": sorted(self.services) if self.services is not None else None,
            "operations": sorted(self.operations) if self.operations is not None else None,
            "seed": self.seed,
            "times": self.times,
            "external": self.external,
            "hits": self.hits,
        }
        if self.kind == "latency":
            described |= {"ms": self.ms, "clock": self.clock}
        if self.kind == "lost_response":
            described["answer"] = self.answer
        return described


def parse_fault(kind: str, params: dict[str, Any]) -> Fault:
    """A fault from the admin route's ``{"fault": kind, "params": {...}}`` (ValueError when bad)."""
    if kind not in KINDS:
        raise ValueError(f"unknown AWS call fault {kind!r}; known: {', '.join(KINDS)}")
    allowed = {"rate", "services", "operations", "seed", "times", "external"}
    if kind == "latency":
        allowed |= {"ms", "clock"}
    if kind == "lost_response":
        allowed |= {"answer"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"bad parameters for fault {kind!r}: {', '.join(unknown)}")
    if "rate" not in params:
        raise ValueError(f"fault {kind!r} needs rate")
    return Fault(
        kind=kind,
        rate=float(params["rate"]),
        services=_names(params.get("services")),
        operations=_names(params.get("operations")),
        seed=int(params.get("seed", 0)),
        times=int(params["times"]) if params.get("times") is not None else None,
        external=bool(params.get("external", False)),
        ms=float(params.get("ms", 0.0)),
        clock=params.get("clock", "wall"),
        answer=params.get("answer", "server_error"),
    )


def _names(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(str(name) for name in value)


class FaultPlan:
    """The armed faults; :meth:`check` is an interception check, :meth:`answer` serves HTTP clients."""

    def __init__(self, sleep_simulated: Callable[[float], None]) -> None:
        # waits simulated seconds (SandboxClock.sleep: the waiting caller is not work meanwhile)
        self._sleep_simulated = sleep_simulated
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def apply(self, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        fault = parse_fault(kind, params)
        with self._lock:
            if fault.rate > 0:
                self._faults.append(fault)
        return fault.describe()

    def clear(self) -> dict[str, Any]:
        with self._lock:
            cleared = len(self._faults)
            self._faults.clear()
        return {"cleared": cleared}

    def describe(self) -> list[dict[str, Any]]:
        with self._lock:
            return [fault.describe() for fault in self._faults]

    def check(self, call: Call) -> Answer | LostResponse | None:
        return self.answer(call.service_model, call.operation, external=call.principal is None)

    def answer(
        self, service_model: ServiceModel, operation: str | None, *, external: bool
    ) -> Answer | LostResponse | None:
        """The error to answer (after any latency), the answer to give instead of the service's once
        the call took effect (LostResponse), or None to let the call through."""
        service = service_model.service_name
        with self._lock:
            hit = [fault for fault in self._faults if fault.hits_call(service, operation, external)]
        for fault in hit:
            if fault.kind == "latency":
                seconds = fault.ms / 1000
                if fault.clock == "wall":
                    time.sleep(seconds)
                else:
                    self._sleep_simulated(seconds)
        # a call refused up front never reaches the service, so it cannot also lose its answer
        failing = next((fault for fault in hit if fault.kind in ("throttling", "server_error")), None)
        if failing is not None:
            kind: Literal["throttling", "server_error"] = (
                "throttling" if failing.kind == "throttling" else "server_error"
            )
            return error_answer(service_model, operation, kind)
        lost = next((fault for fault in hit if fault.kind == "lost_response"), None)
        if lost is None:
            return None
        if lost.answer == "timeout":
            return LostResponse(instead=None)
        return LostResponse(instead=error_answer(service_model, operation, "server_error"))


def error_answer(
    service_model: ServiceModel, operation: str | None, kind: Literal["throttling", "server_error"]
) -> Answer:
    status, headers, body = error_response(service_model, error_code(service_model, operation or "", kind))
    return Answer(status, headers, body)
