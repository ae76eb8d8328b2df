"""``LambdaRuntime``: the template's functions registered, invoked synchronously and asynchronously
(with Lambda's retries and dead-letter targets), concurrency enforced, handlers loaded per
environment with the function's environment variables.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import boto3

from sandbox.emulator import lambda_modules
from sandbox.emulator.deploy import FunctionSpec
from sandbox.emulator.lambda_runtime.dispatcher import AsyncDispatcher
from sandbox.emulator.lambda_runtime.environments import (
    Environment,
    Function,
    InitError,
    Invocation,
    provided_names,
)
from sandbox.emulator.lambda_runtime.results import (
    INIT_SECONDS,
    LAMBDA_MANAGED_PREFIXES,
    MAX_RESPONSE_BYTES,
    SANDBOX_CREDENTIALS,
    FunctionMetrics,
    FunctionThrottled,
    InvocationResult,
    LambdaContext,
    error_payload,
    json_default,
    log_group_name,
    payload_bytes,
)


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
        # (the sandbox clock passes simulated time at real speed meanwhile: sandbox/emulator/clock.py)
        self._working = working
        self.account_id = account_id
        # Lambda retries a failed async invocation after ~1 min, then ~2 min (simulated time).
        self._retry_delay = retry_delay or (lambda seconds: 0.0)
        self._session = session
        self._functions: dict[str, Function] = {}
        self._by_name: dict[str, str] = {}
        self._metrics: dict[str, FunctionMetrics] = defaultdict(FunctionMetrics)
        self._metrics_lock = threading.Lock()
        self.dispatcher = AsyncDispatcher()

    # registration ------------------------------------------------------------------------------
    def register(self, spec: FunctionSpec) -> None:
        layer_packages = [d / "python" for d in spec.layer_dirs]
        names = provided_names([spec.code_dir, *spec.layer_dirs, *layer_packages])
        lambda_modules.view(names | lambda_modules.PER_ENVIRONMENT_PACKAGES)
        self._functions[spec.logical_id] = Function(spec)
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
        invocation = Invocation(payload_bytes(payload), str(uuid.uuid4()))
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
                invocation.payload = error_payload(
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

    def _acquire(self, function: Function) -> Environment:
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
        return Environment(self, spec, number)

    def _release(self, function: Function, environment: Environment, *, reuse: bool) -> None:
        if reuse:
            with function.lock:
                function.idle.append(environment)
        with self._metrics_lock:
            self._metrics[function.spec.logical_id].concurrent -= 1

    def invoke_async(self, name_or_arn: str, payload: bytes | str | Any) -> str:
        """Event invocation: queued, retried on error (MaximumRetryAttempts), then dead-lettered;
        run at once with other invocations, as Lambda's queue feeds every free environment."""
        spec = self.spec(name_or_arn)
        body = payload_bytes(payload)
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
        environment: Environment,
        handler: Callable[[Any, LambdaContext], Any],
        event: Any,
        request_id: str,
        deadline: float,
    ) -> tuple[bytes, str | None]:
        context = LambdaContext(environment.spec, request_id, deadline)
        try:
            result = handler(event, context)
        except Exception as error:  # noqa: BLE001 - a handler error is a Lambda error result
            return error_payload(type(error).__name__, str(error), request_id, error=error), "Unhandled"
        try:
            response = json.dumps(result, default=json_default).encode()
        except (TypeError, ValueError) as error:
            return error_payload(
                "Runtime.MarshalError", f"Unable to marshal response: {error}", request_id
            ), "Unhandled"
        if len(response) > MAX_RESPONSE_BYTES:
            # Lambda answers Invoke 200 with this function error; an API Gateway proxy answers 502
            message = (
                f"Response payload size exceeded maximum allowed payload size ({MAX_RESPONSE_BYTES} bytes)."
            )
            return error_payload(
                "Function.ResponseSizeTooLarge", message, request_id, with_trace=False
            ), "Unhandled"
        return response, None

    def _load_handler(self, environment: Environment) -> Callable[[Any, LambdaContext], Any]:
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
            raise InitError(
                "Runtime.ImportModuleError", f"Unable to import module '{module_name}': {error}"
            ) from error
        handler: Callable[[Any, LambdaContext], Any] | None = getattr(module, function_name, None)
        if not callable(handler):
            raise InitError(
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
            if not key.startswith(LAMBDA_MANAGED_PREFIXES) and (value := host.get(key)) is not None
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
