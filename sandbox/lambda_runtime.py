"""The template's Lambda functions, run in-process the way the Python Lambda runtime runs them.

Invocations run as Lambda runs them: at once. Each function has a pool of *execution environments*;
an invocation takes an idle one or starts a new one (a cold start: the handler module imported), so
two invocations of one function at the same time run in two environments, and an environment runs
one invocation at a time. Each environment is a thread with its own modules
(``sandbox.lambda_modules``: the names its CodeUri and layers provide, and Powertools, are per
environment; every function's ``app.py`` is ``app``, a layer's lru_caches and settings are per
environment, as on Lambda), its own ``os.environ`` and its own identity for AWS calls, so nothing is
swapped process-wide and no lock serialises handlers. The function's ``Timeout`` is enforced in wall
time (Lambda work runs at real speed on the sandbox clock): past it the invocation fails with
``Sandbox.Timedout`` and its environment is killed (an exception raised in its thread, so it makes no
further call) and never reused. ``ReservedConcurrentExecutions`` caps the environments busy at once:
one more synchronous invocation gets ``TooManyRequestsException`` (``FunctionThrottled``); an
asynchronous one waits in Lambda's queue and is retried; an SQS batch goes back to its queue.

Environment: each invocation gets its own ``os.environ``, seen only by the thread running it (a
per-thread view installed over the process's mapping, see :class:`_ThreadEnviron`): the host's
variables minus any AWS / Powertools / Lambda configuration, plus what Lambda sets and the
template's variables. No other thread's view changes, and nothing is written back afterwards, so a
host change made meanwhile (a test's monkeypatch teardown) is never undone. Writing the host
environment back was the flaky ``ProfileNotFound: host-profile``: an invocation that started
before a test removed its ``AWS_PROFILE`` restored it when it ended, for every later boto3 client.
Threads a handler starts see the host's environment and modules.

Results are shaped exactly as Lambda returns them: a handler exception becomes FunctionError
``Unhandled`` with an ``errorType``/``errorMessage``/``requestId``/``stackTrace`` payload, so Step
Functions Retry/Catch on custom error names and ``Lambda.*`` work.
"""

from __future__ import annotations

import ctypes
import decimal
import heapq
import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import boto3
from moto.awslambda.utils import get_backend
from moto.sqs.models import sqs_backends

from sandbox import lambda_modules
from sandbox.deploy import FunctionSpec
from sandbox.invocation import CURRENT_FUNCTION

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
_LAMBDA_MANAGED_PREFIXES: Final = ("AWS_", "POWERTOOLS_", "LAMBDA_", "_X_AMZN_", "BOTO_", "_HANDLER")
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


class _Killed(BaseException):
    """Raised in a timed-out environment's thread: ends its invocation as Lambda ends the process
    (a BaseException, so the handler's ``except Exception`` does not swallow it)."""


@dataclass
class _Invocation:
    """One invocation handed to an environment's thread; the caller waits on ``started`` / ``done``."""

    body: bytes
    request_id: str
    started: threading.Event = field(default_factory=threading.Event)  # initialised, handler called
    done: threading.Event = field(default_factory=threading.Event)
    deadline: float = 0.0
    cold: bool = False
    payload: bytes = b""
    function_error: str | None = None


class _Environment:
    """One execution environment: a thread that runs one invocation at a time with the function's
    own modules (a ``ModuleSpace``), identity (``CURRENT_FUNCTION``) and, per invocation, environ."""

    def __init__(self, runtime: LambdaRuntime, spec: FunctionSpec, number: int) -> None:
        self.runtime = runtime
        self.spec = spec
        self.space = lambda_modules.ModuleSpace(
            [
                str(spec.code_dir),
                *(str(d) for d in spec.layer_dirs),
                *(str(d / "python") for d in spec.layer_dirs if (d / "python").is_dir()),
            ]
        )
        self.handler: Callable[[Any, LambdaContext], Any] | None = None
        self._work: queue.SimpleQueue[_Invocation | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=f"lambda-{spec.name}-{number}", daemon=True)
        self.thread.start()

    def run(self, invocation: _Invocation) -> None:
        self._work.put(invocation)

    def stop(self) -> None:
        self._work.put(None)

    def kill(self) -> None:
        """End the invocation running in this environment now (at its thread's next bytecode)."""
        if self.thread.ident is not None and self.thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread.ident), ctypes.py_object(_Killed)
            )

    def _serve(self) -> None:
        CURRENT_FUNCTION.set(self.spec)
        try:
            with lambda_modules.running_in(self.space):
                while (invocation := self._work.get()) is not None:
                    self._invoke(invocation)
        except _Killed:
            return  # a timed-out environment ends here; the runtime no longer uses it

    def _invoke(self, invocation: _Invocation) -> None:
        runtime, spec = self.runtime, self.spec
        environ = _thread_environ()
        environ.enter(runtime._function_environ(spec, environ.host))
        try:
            invocation.cold = self.handler is None
            try:
                event = json.loads(invocation.body) if invocation.body.strip() else {}
            except ValueError as error:
                invocation.payload = _error_payload(
                    "Runtime.UnmarshalError", f"Unable to unmarshal input: {error}", invocation.request_id
                )
                invocation.function_error = "Unhandled"
                return
            try:
                handler = runtime._load_handler(self)
            except _InitError as error:
                invocation.payload = _error_payload(
                    error.error_type, str(error), invocation.request_id, with_trace=False
                )
                invocation.function_error = "Unhandled"
                return
            invocation.deadline = time.monotonic() + spec.timeout
            invocation.started.set()
            invocation.payload, invocation.function_error = runtime._run_handler(
                self, handler, event, invocation.request_id, invocation.deadline
            )
        finally:
            environ.leave()
            invocation.done.set()
            invocation.started.set()  # after done: a caller woken here by an init error sees it done


class _Function:
    """A function's environments: the idle ones, how many run now, its reserved concurrency."""

    def __init__(self, spec: FunctionSpec) -> None:
        self.spec = spec
        self.idle: list[_Environment] = []
        self.created = 0
        self.lock = threading.Lock()
        # Event invocations (schedules, async events) run at most this many at once per function: on a
        # machine of two cores, a 5-minute schedule fired a hundred times by one clock jump would start a
        # hundred cold environments at once and starve everything (Lambda's queue delivers them later)
        self.event_slots = threading.BoundedSemaphore(EVENT_ENVIRONMENTS)


class _InitError(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _provided_names(directories: list[Path]) -> frozenset[str]:
    """Top-level module names a CodeUri / layer directory provides (app, autopilot, …)."""
    names: set[str] = set()
    for directory in directories:
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            if entry.suffix == ".py":
                names.add(entry.stem)
            elif entry.is_dir() and entry.name.isidentifier():
                names.add(entry.name)
    return frozenset(names)


class AsyncDispatcher:
    """One worker thread starting deliveries in due order (async invokes, event deliveries); work
    submitted with ``spawn`` (an asynchronous invocation) runs in a thread of its own, at once with the
    rest, as Lambda runs queued events in as many environments as are free."""

    def __init__(self, name: str = "sandbox-dispatcher") -> None:
        self._heap: list[tuple[float, int, Callable[[], None], bool]] = []
        self._condition = threading.Condition()
        self._sequence = 0
        self._busy = False
        self._spawned = 0  # spawned work still running
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.errors: list[BaseException] = []

    def submit(self, work: Callable[[], None], delay: float = 0.0, *, spawn: bool = False) -> None:
        with self._condition:
            if self._stopping:
                return
            self._sequence += 1
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay), self._sequence, work, spawn))
            self._condition.notify_all()

    def pending(self) -> int:
        with self._condition:
            return len(self._heap) + (1 if self._busy else 0) + self._spawned

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued or running; False when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._heap or self._busy or self._spawned:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(min(remaining, 0.05))
        return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._condition:
            self._stopping = True
            self._heap.clear()
            self._condition.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopping and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._condition.wait(wait if wait is None else max(0.001, wait))
                if self._stopping:
                    return
                _, _, work, spawn = heapq.heappop(self._heap)
                if spawn:
                    self._spawned += 1
                else:
                    self._busy = True
            if spawn:
                threading.Thread(
                    target=self._work, args=(work, True), name="sandbox-async-invoke", daemon=True
                ).start()
            else:
                self._work(work, False)

    def _work(self, work: Callable[[], None], spawned: bool) -> None:
        try:
            work()
        except Exception as error:  # noqa: BLE001 - a failed delivery must not kill the worker
            self.errors.append(error)
            traceback.print_exc()
        finally:
            with self._condition:
                if spawned:
                    self._spawned -= 1
                else:
                    self._busy = False
                self._condition.notify_all()


class LambdaRuntime:
    """Runs registered template functions in-process; synchronous and asynchronous invocation."""

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        retry_delay: Callable[[float], float] | None = None,
        session: boto3.Session | None = None,
        working: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> None:
        self.region = region
        # marks an invocation, from its call to its end, as control-plane work
        # (the sandbox clock passes simulated time at real speed meanwhile: sandbox/clock.py)
        self._working = working
        self.account_id = account_id
        # Lambda retries a failed async invocation after ~1 min, then ~2 min (simulated time).
        self._retry_delay = retry_delay or (lambda seconds: 0.0)
        self._session = session
        self._functions: dict[str, _Function] = {}
        self._by_name: dict[str, str] = {}
        self._metrics: dict[str, FunctionMetrics] = defaultdict(FunctionMetrics)
        self._metrics_lock = threading.Lock()
        self.dispatcher = AsyncDispatcher()

    # registration ------------------------------------------------------------------------------
    def register(self, spec: FunctionSpec) -> None:
        layer_packages = [d / "python" for d in spec.layer_dirs]
        names = _provided_names([spec.code_dir, *spec.layer_dirs, *layer_packages])
        lambda_modules.view(names | lambda_modules.PER_ENVIRONMENT_PACKAGES)
        self._functions[spec.logical_id] = _Function(spec)
        for key in (spec.logical_id, spec.name, spec.arn):
            self._by_name[key] = spec.logical_id

    def knows(self, name_or_arn: str) -> bool:
        return self._lookup(name_or_arn) is not None

    def spec(self, name_or_arn: str) -> FunctionSpec:
        logical_id = self._lookup(name_or_arn)
        if logical_id is None:
            raise KeyError(f"no in-process function {name_or_arn!r}")
        return self._functions[logical_id].spec

    def _lookup(self, name_or_arn: str) -> str | None:
        if name_or_arn in self._by_name:
            return self._by_name[name_or_arn]
        if name_or_arn.startswith("arn:"):
            parts = name_or_arn.split(":")
            if len(parts) >= 7:
                return self._by_name.get(parts[6])  # unqualified name of a qualified ARN
        return None

    def stop(self) -> None:
        self.dispatcher.stop()
        for function in self._functions.values():
            with function.lock:
                idle, function.idle = function.idle, []
            for environment in idle:
                environment.stop()

    # metrics -----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, dict[str, Any]]:
        with self._metrics_lock:
            return {name: m.as_dict() for name, m in sorted(self._metrics.items())}

    # invocation --------------------------------------------------------------------------------
    def invoke(self, name_or_arn: str, payload: bytes | str | Any = b"{}") -> InvocationResult:
        """Synchronous (RequestResponse) invocation. ``payload`` may be bytes, a JSON string or an object.
        Raises ``FunctionThrottled`` past the function's reserved concurrency, as Invoke answers 429."""
        spec = self.spec(name_or_arn)
        function = self._functions[spec.logical_id]
        invocation = _Invocation(_payload_bytes(payload), str(uuid.uuid4()))
        with self._working():
            environment = self._acquire(function)
            started = time.monotonic()
            environment.run(invocation)
            # init has its own limit; the handler its Timeout, in wall time (work runs at real speed)
            finished = invocation.started.wait(INIT_SECONDS + spec.timeout) and invocation.done.wait(
                max(0.0, invocation.deadline - time.monotonic())
            )
            if not finished:
                environment.kill()
                message = f"Task timed out after {spec.timeout:.2f} seconds"
                invocation.payload = _error_payload(
                    "Sandbox.Timedout",
                    f"RequestId: {invocation.request_id} Error: {message}",
                    invocation.request_id,
                    with_trace=False,
                )
                invocation.function_error = "Unhandled"
            self._release(function, environment, reuse=finished)
        duration = (time.monotonic() - started) * 1000
        with self._metrics_lock:
            metrics = self._metrics[spec.logical_id]
            metrics.invocations += 1
            metrics.duration_ms += duration
            metrics.cold_starts += 1 if invocation.cold else 0
            metrics.errors += 1 if invocation.function_error else 0
            metrics.timeouts += 0 if finished else 1
        return InvocationResult(
            invocation.payload, invocation.function_error, invocation.request_id, duration
        )

    def _acquire(self, function: _Function) -> _Environment:
        """An idle environment of ``function``, or a new one; FunctionThrottled past its reserved
        concurrency (counted, as Lambda's Throttles metric)."""
        spec = function.spec
        with self._metrics_lock:
            metrics = self._metrics[spec.logical_id]
            if spec.reserved_concurrency is not None and metrics.concurrent >= spec.reserved_concurrency:
                metrics.throttles += 1
                raise FunctionThrottled(spec.name)
            metrics.concurrent += 1
            metrics.peak_concurrent = max(metrics.peak_concurrent, metrics.concurrent)
        with function.lock:
            if function.idle:
                return function.idle.pop()
            function.created += 1
            number = function.created
        return _Environment(self, spec, number)

    def _release(self, function: _Function, environment: _Environment, *, reuse: bool) -> None:
        if reuse:
            with function.lock:
                function.idle.append(environment)
        with self._metrics_lock:
            self._metrics[function.spec.logical_id].concurrent -= 1

    def invoke_async(self, name_or_arn: str, payload: bytes | str | Any) -> str:
        """Event invocation: queued, retried on error (MaximumRetryAttempts), then dead-lettered;
        run at once with other invocations, as Lambda's queue feeds every free environment."""
        spec = self.spec(name_or_arn)
        body = _payload_bytes(payload)
        request_id = str(uuid.uuid4())
        with self._metrics_lock:
            self._metrics[spec.logical_id].async_invocations += 1
        self.dispatcher.submit(lambda: self._run_async(spec, body, request_id, attempt=0), spawn=True)
        return request_id

    def _run_async(
        self, spec: FunctionSpec, body: bytes, request_id: str, attempt: int, throttled: float = 0.0
    ) -> None:
        try:
            with self._functions[spec.logical_id].event_slots:
                result = self.invoke(spec.logical_id, body)
        except FunctionThrottled:
            # Lambda returns a throttled event to its queue and retries it for up to 6 hours, from 1 s
            # after the first attempt up to every 5 minutes; throttles are not retry attempts
            wait = min(300.0, max(1.0, throttled))  # 1, 1, 2, 4, 8 … 300 s: doubling, as the time waited
            if throttled + wait > 6 * 3600:
                return  # the event's age is past Lambda's limit: dropped (no failure to dead-letter)
            self.dispatcher.submit(
                lambda: self._run_async(spec, body, request_id, attempt, throttled + wait),
                self._retry_delay(wait),
                spawn=True,
            )
            return
        if result.ok:
            return
        if attempt < spec.max_async_retries:
            delay = self._retry_delay(60.0 * (attempt + 1))
            self.dispatcher.submit(
                lambda: self._run_async(spec, body, request_id, attempt + 1), delay, spawn=True
            )
            return
        if spec.dead_letter_arn:
            self._dead_letter(spec, body, request_id, result)

    def _dead_letter(
        self, spec: FunctionSpec, body: bytes, request_id: str, result: InvocationResult
    ) -> None:
        error = result.json() or {}
        attributes: dict[str, Any] = {
            "RequestID": {"DataType": "String", "StringValue": request_id},
            "ErrorCode": {"DataType": "Number", "StringValue": "200"},
            "ErrorMessage": {
                "DataType": "String",
                "StringValue": str(error.get("errorMessage", ""))[:256] or "error",
            },
        }
        session = self._session or boto3.Session()
        target = str(spec.dead_letter_arn)
        if target.split(":")[2] == "sqs":
            sqs = session.client("sqs", region_name=self.region)
            url = sqs.get_queue_url(
                QueueName=target.split(":")[5], QueueOwnerAWSAccountId=target.split(":")[4]
            )
            sqs.send_message(
                QueueUrl=url["QueueUrl"], MessageBody=body.decode(), MessageAttributes=attributes
            )
        else:
            session.client("sns", region_name=self.region).publish(
                TopicArn=target,
                Message=body.decode(),
                MessageAttributes={
                    k: {"DataType": v["DataType"], "StringValue": v["StringValue"]}
                    for k, v in attributes.items()
                },
            )

    # the handler call ----------------------------------------------------------------------------
    def _run_handler(
        self,
        environment: _Environment,
        handler: Callable[[Any, LambdaContext], Any],
        event: Any,
        request_id: str,
        deadline: float,
    ) -> tuple[bytes, str | None]:
        context = LambdaContext(environment.spec, request_id, deadline)
        try:
            result = handler(event, context)
        except Exception as error:  # noqa: BLE001 - a handler error is a Lambda error result
            return _error_payload(type(error).__name__, str(error), request_id, error=error), "Unhandled"
        try:
            response = json.dumps(result, default=_json_default).encode()
        except (TypeError, ValueError) as error:
            return _error_payload(
                "Runtime.MarshalError", f"Unable to marshal response: {error}", request_id
            ), "Unhandled"
        if len(response) > MAX_RESPONSE_BYTES:
            # Lambda answers Invoke 200 with this function error; an API Gateway proxy answers 502
            message = (
                f"Response payload size exceeded maximum allowed payload size ({MAX_RESPONSE_BYTES} bytes)."
            )
            return _error_payload(
                "Function.ResponseSizeTooLarge", message, request_id, with_trace=False
            ), "Unhandled"
        return response, None

    def _load_handler(self, environment: _Environment) -> Callable[[Any, LambdaContext], Any]:
        if environment.handler is not None:
            return environment.handler
        spec = environment.spec
        module_name, _, function_name = spec.handler.rpartition(".")
        module_name = module_name.replace("/", ".")
        try:
            # by name, as Lambda's runtime imports it: sys.modules then holds the handler module's view,
            # where pydantic, dataclasses and typing look a class's module up to resolve its annotations
            importlib.import_module(module_name)
            module = environment.space.module(module_name)
        except Exception as error:
            traceback.print_exc()
            raise _InitError(
                "Runtime.ImportModuleError", f"Unable to import module '{module_name}': {error}"
            ) from error
        handler: Callable[[Any, LambdaContext], Any] | None = getattr(module, function_name, None)
        if not callable(handler):
            raise _InitError(
                "Runtime.HandlerNotFound", f"Handler '{function_name}' missing on module '{module_name}'"
            )
        environment.handler = handler
        return environment.handler

    def _function_environ(self, spec: FunctionSpec, host: Mapping[str, str]) -> dict[str, str]:
        """The host's variables minus its AWS / Powertools / Lambda configuration, plus Lambda's
        and the template's."""
        environ = {
            key: value
            for key in list(host)  # another thread may change the host meanwhile: read what is left
            if not key.startswith(_LAMBDA_MANAGED_PREFIXES) and (value := host.get(key)) is not None
        }
        environ |= {
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_size),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": log_group_name(spec),
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{spec.runtime}",
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
            "TZ": ":UTC",
            **SANDBOX_CREDENTIALS,
        }
        environ.update(spec.environment)
        return environ


class _ThreadEnviron(MutableMapping[str, str]):
    """``os.environ`` with a per-thread view: a thread running a function reads and writes that
    invocation's private dict (a stack: a handler may invoke another function synchronously);
    every other thread reads and writes the process's own mapping, ``host``."""

    def __init__(self, host: MutableMapping[str, str]) -> None:
        self.host = host
        self._local = threading.local()

    def enter(self, environ: dict[str, str]) -> None:
        self._stack().append(environ)

    def leave(self) -> None:
        self._stack().pop()

    # what os._Environ offers beyond a MutableMapping: copy() and the | operators
    def copy(self) -> dict[str, str]:
        return dict(self._current())

    def __or__(self, other: Mapping[str, str]) -> dict[str, str]:
        return {**self._current(), **other}

    def __ror__(self, other: Mapping[str, str]) -> dict[str, str]:
        return {**other, **self._current()}

    def __ior__(self, other: Mapping[str, str]) -> _ThreadEnviron:
        self.update(other)
        return self

    def _stack(self) -> list[dict[str, str]]:
        stack: list[dict[str, str]] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _current(self) -> MutableMapping[str, str]:
        stack = self._stack()
        return stack[-1] if stack else self.host

    def __getitem__(self, key: str) -> str:
        return self._current()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._current()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"_ThreadEnviron({self._current()!r})"


_ENVIRON_LOCK: Final = threading.Lock()


def _thread_environ() -> _ThreadEnviron:
    """Install the per-thread ``os.environ`` (once per process; host threads see no difference)."""
    with _ENVIRON_LOCK:
        if not isinstance(os.environ, _ThreadEnviron):
            # a view over the same mapping, not a replacement of its contents
            os.environ = _ThreadEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003
        return os.environ  # type: ignore[return-value]


def _payload_bytes(payload: bytes | str | Any) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, default=_json_default).encode()


def _json_default(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_THIS_FILE: Final = str(Path(__file__).resolve())


def _error_payload(
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
        body["stackTrace"] = traceback.format_list([f for f in frames if f.filename != _THIS_FILE])
    return json.dumps(body).encode()


class SqsEventSourcePoller:
    """Lambda's SQS poller: batches of BatchSize, partial batch responses, visibility and redrive.

    Reads the event-source mappings from moto's Lambda backend (so Create/Update/Delete
    EventSourceMapping and Enabled take effect) and the queues from moto's SQS backend. A failed
    message stays in the queue for the queue's VisibilityTimeout (scaled to sandbox time by
    ``visibility_seconds``) and moves to the RedrivePolicy's DLQ after maxReceiveCount receives.
    """

    def __init__(
        self,
        runtime: LambdaRuntime,
        *,
        visibility_seconds: Callable[[float], float] | None = None,
        interval: float = 0.02,
    ) -> None:
        self.runtime = runtime
        self._visibility_seconds = visibility_seconds or (lambda seconds: seconds)
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._poll_lock = threading.Lock()
        self._flight = threading.Lock()
        self._in_flight: Counter[str] = Counter()  # batches running per mapping
        self.batches = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sandbox-sqs-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                delivered = self.poll_once(wait=False)
            except Exception:  # noqa: BLE001 - keep polling; the error is printed
                traceback.print_exc()
                delivered = 0
            if not delivered:
                self._stop.wait(self._interval)

    def poll_once(self, *, wait: bool = True) -> int:
        """One pass over every enabled SQS mapping: each gets as many batches as it has pollers free
        (``SQS_POLLERS``, or its ScalingConfig's MaximumConcurrency), each invoked in a thread of its
        own, so batches run at once as on Lambda. Returns how many started; with ``wait``, after they end."""
        started: list[threading.Thread] = []
        with self._poll_lock:
            runtime = self.runtime
            sqs = sqs_backends[runtime.account_id][runtime.region]
            mappings = list(get_backend(runtime.account_id, runtime.region)._event_source_mappings.values())
            for mapping in mappings:
                arn = str(mapping.event_source_arn)
                if (
                    arn.split(":")[2] != "sqs"
                    or not mapping.enabled
                    or not runtime.knows(mapping.function_arn)
                ):
                    continue
                queue = next((q for q in sqs.queues.values() if q.queue_arn == arn), None)
                if queue is None:
                    continue
                pollers = int((mapping.scaling_config or {}).get("MaximumConcurrency") or SQS_POLLERS)
                visibility = int(queue.visibility_timeout)  # type: ignore[attr-defined]
                while self._busy(mapping.uuid) < pollers:
                    messages = sqs.receive_message(queue.name, int(mapping.batch_size or 10), 0, visibility)
                    if not messages:
                        break
                    with self._flight:
                        self._in_flight[mapping.uuid] += 1
                    self.batches += 1
                    thread = threading.Thread(
                        target=self._deliver,
                        args=(mapping, queue.name, arn, messages, visibility),
                        name="sandbox-sqs-batch",
                        daemon=True,
                    )
                    thread.start()
                    started.append(thread)
        if wait:
            for thread in started:
                thread.join()
        return len(started)

    def in_flight(self) -> int:
        """Batches being delivered now."""
        with self._flight:
            return sum(self._in_flight.values())

    def _busy(self, mapping_id: str) -> int:
        with self._flight:
            return self._in_flight[mapping_id]

    def _deliver(self, mapping: Any, queue_name: str, arn: str, messages: list[Any], visibility: int) -> None:
        runtime = self.runtime
        sqs = sqs_backends[runtime.account_id][runtime.region]
        try:
            event = {"Records": [_sqs_record(message, arn, runtime.region) for message in messages]}
            try:
                result = runtime.invoke(mapping.function_arn, event)
            except FunctionThrottled:
                failed = {str(message.id) for message in messages}  # back to the queue, as Lambda does
            else:
                failed = _failed_message_ids(result, messages, mapping.function_response_types or [])
            retry_after = max(0, round(self._visibility_seconds(visibility)))
            for message in messages:
                receipt = str(message.receipt_handle)
                if message.id in failed:
                    sqs.change_message_visibility(queue_name, receipt, retry_after)
                else:
                    sqs.delete_message(queue_name, receipt)
        except Exception:  # noqa: BLE001 - a failed batch must not end the poller; printed
            traceback.print_exc()
        finally:
            with self._flight:
                self._in_flight[mapping.uuid] -= 1


def _sqs_record(message: Any, queue_arn: str, region: str) -> dict[str, Any]:
    attributes = {
        "ApproximateReceiveCount": str(message.approximate_receive_count),
        "SentTimestamp": str(message.sent_timestamp),
        "SenderId": str(message.sender_id),
        "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
    }
    if message.group_id:
        attributes["MessageGroupId"] = str(message.group_id)
    if message.deduplication_id:
        attributes["MessageDeduplicationId"] = str(message.deduplication_id)
    if message.sequence_number:
        attributes["SequenceNumber"] = str(message.sequence_number)
    record: dict[str, Any] = {
        "messageId": message.id,
        "receiptHandle": message.receipt_handle,
        "body": message.body,
        "attributes": attributes,
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value.get("DataType"),
            }
            for name, value in (message.message_attributes or {}).items()
        },
        "md5OfBody": message.body_md5,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.message_attributes:
        record["md5OfMessageAttributes"] = message.attribute_md5
    return record


def _failed_message_ids(result: InvocationResult, messages: list[Any], response_types: list[str]) -> set[str]:
    """Which messages stay in the queue: all on error; with ReportBatchItemFailures, those reported."""
    every = {str(message.id) for message in messages}
    if not result.ok:
        return every
    if "ReportBatchItemFailures" not in response_types:
        return set()
    response = result.json()
    if not isinstance(response, dict) or not response.get("batchItemFailures"):
        return set()
    failures = response["batchItemFailures"]
    ids = {item.get("itemIdentifier") for item in failures if isinstance(item, dict)}
    if not isinstance(failures, list) or None in ids or "" in ids or not ids <= every:
        return every  # an invalid partial response fails the whole batch, as Lambda does
    return {str(i) for i in ids}
