"""AWS::Lambda::EventInvokeConfig: how often the runtime retries a failed asynchronous invocation.
Destinations and a maximum event age are not run by the runtime, so they are refused."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names
from ..stack import Resource, TemplateError


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    if props.get("DestinationConfig") or props.get("Qualifier", "$LATEST") != "$LATEST":
        raise TemplateError("DestinationConfig and a Qualifier other than $LATEST are not supported")
    spec = ctx.stack.function(str(props["FunctionName"]))
    retries = int(props.get("MaximumRetryAttempts", 2))
    ctx.client("lambda").put_function_event_invoke_config(
        FunctionName=spec.name, MaximumRetryAttempts=retries
    )
    spec.max_async_retries = retries
    return Resource(logical_id, "AWS::Lambda::EventInvokeConfig", f"{spec.name}$LATEST")


PROVIDER = Provider(
    "AWS::Lambda::EventInvokeConfig",
    names("FunctionName Qualifier MaximumRetryAttempts DestinationConfig"),
    create,
)
