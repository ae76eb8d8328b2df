"""Lambda seams: moto's no-docker invoke routed to the in-process runtime (throttling as Lambda
answers it), and SQS event-source mappings detached from moto's inline delivery so the runtime's
poller delivers batches.
"""

from __future__ import annotations

import json
from typing import Any

from moto.awslambda.models import LambdaBackend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.exceptions import JsonRESTError
from moto.sqs.models import sqs_backends

from sandbox.emulator.lambda_runtime import FunctionThrottled
from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import header, replace, state


# --------------------------------------------------------------------------------------------------
# seam: Lambda invoke → in-process runtime
# --------------------------------------------------------------------------------------------------
def route_lambda_invoke() -> None:
    original = expect_signature(
        LambdaSimpleBackend,
        "invoke",
        ["self", "function_name", "qualifier", "body", "headers", "response_headers"],
        "route_lambda_invoke",
    )

    def invoke(  # noqa: PLR0917 - moto's signature
        self: LambdaSimpleBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> str | bytes | None:
        runtime = state.runtime
        function = self.get_function(function_name, qualifier)  # ResourceNotFoundException as Lambda
        if runtime is None or not runtime.knows(function.function_name):
            result: str | bytes | None = original(
                self, function_name, qualifier, body, headers, response_headers
            )
            return result
        payload = body if body else b"{}"
        invocation_type = header(headers, "X-Amz-Invocation-Type") or "RequestResponse"
        if invocation_type == "Event":
            runtime.invoke_async(function.function_name, payload)
            return b""
        if invocation_type == "DryRun":
            return b""
        try:
            outcome = runtime.invoke(function.function_name, payload)
        except FunctionThrottled as throttled:
            raise _TooManyRequests(throttled) from throttled
        if outcome.function_error:
            response_headers["x-amz-function-error"] = outcome.function_error
        response_headers["x-amz-executed-version"] = "$LATEST"
        return outcome.payload

    replace(LambdaSimpleBackend, "invoke", invoke)


class _TooManyRequests(JsonRESTError):
    """Invoke's 429 past a function's reserved concurrency, with the members botocore's model gives it."""

    code = 429

    def __init__(self, throttled: FunctionThrottled) -> None:
        super().__init__(throttled.error_type, str(throttled))
        self.description = json.dumps({"Type": "User", "message": str(throttled), "Reason": throttled.reason})


# --------------------------------------------------------------------------------------------------
# seam: SQS event-source mappings are polled by the runtime, not delivered inline by moto
# --------------------------------------------------------------------------------------------------
def detach_sqs_event_source_mappings() -> None:
    original = expect_signature(
        LambdaBackend, "create_event_source_mapping", ["self", "spec"], "detach_sqs_event_source_mappings"
    )

    def create_event_source_mapping(self: LambdaBackend, spec: dict[str, Any]) -> Any:
        mapping: Any = original(self, spec)
        if state.runtime is not None and str(mapping.event_source_arn).split(":")[2] == "sqs":
            queues = sqs_backends[self.account_id][self.region_name].queues.values()
            for queue in queues:
                if not hasattr(queue, "lambda_event_source_mappings"):
                    raise SeamDrift(
                        "detach_sqs_event_source_mappings: Queue.lambda_event_source_mappings is gone"
                    )
                function_arn = str(mapping.function_arn)
                if queue.lambda_event_source_mappings.get(function_arn) is mapping:
                    del queue.lambda_event_source_mappings[function_arn]
        return mapping

    replace(LambdaBackend, "create_event_source_mapping", create_event_source_mapping)
