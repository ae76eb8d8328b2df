"""AWS::SQS::Queue: CreateQueue; every property but the name and tags is a queue attribute."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, attributes, names, tags_map
from ..stack import Resource

_ATTRIBUTES: Final = names(
    "DelaySeconds MaximumMessageSize MessageRetentionPeriod ReceiveMessageWaitTimeSeconds"
    " VisibilityTimeout RedrivePolicy RedriveAllowPolicy FifoQueue ContentBasedDeduplication"
    " DeduplicationScope FifoThroughputLimit KmsMasterKeyId KmsDataKeyReusePeriodSeconds"
    " SqsManagedSseEnabled"
)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    fifo = ".fifo" if props.get("FifoQueue") else ""
    name = str(props.get("QueueName") or ctx.physical_name(logical_id, 75) + fifo)
    args: dict[str, Any] = {
        "QueueName": name,
        "Attributes": attributes(props, _ATTRIBUTES),
    }
    if props.get("Tags"):
        args["tags"] = tags_map(props["Tags"])
    sqs = ctx.client("sqs")
    url = str(sqs.create_queue(**args)["QueueUrl"])
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return Resource(logical_id, "AWS::SQS::Queue", url, {"Arn": arn, "QueueName": name, "QueueUrl": url}, arn)


PROVIDER = Provider("AWS::SQS::Queue", frozenset({"QueueName", "Tags", *_ATTRIBUTES}), create)
