"""AWS::Lambda::EventSourceMapping: kept in moto; the runtime's SQS poller delivers its batches."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names
from ..stack import Resource, TemplateError


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    if str(props["EventSourceArn"]).split(":")[2] != "sqs":
        raise TemplateError(f"EventSourceArn {props['EventSourceArn']}: the sandbox polls SQS queues only")
    mapping = ctx.client("lambda").create_event_source_mapping(**props)
    uuid = str(mapping["UUID"])
    return Resource(
        logical_id,
        "AWS::Lambda::EventSourceMapping",
        uuid,
        {"Id": uuid},
        mapping.get("EventSourceMappingArn"),
    )


PROVIDER = Provider(
    "AWS::Lambda::EventSourceMapping",
    names(
        "EventSourceArn FunctionName BatchSize Enabled FunctionResponseTypes MaximumBatchingWindowInSeconds"
    ),
    create,
)
