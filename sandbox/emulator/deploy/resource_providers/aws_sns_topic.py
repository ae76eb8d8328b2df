"""AWS::SNS::Topic: CreateTopic with its attributes, then the inline subscriptions."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, attributes, names, tags_list
from ..stack import Resource

_ATTRIBUTES: Final = names(
    "DisplayName KmsMasterKeyId FifoTopic ContentBasedDeduplication SignatureVersion TracingConfig"
)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.get("TopicName") or ctx.physical_name(logical_id, 256))
    args: dict[str, Any] = {
        "Name": name,
        "Attributes": attributes(props, _ATTRIBUTES),
    }
    if props.get("Tags"):
        args["Tags"] = tags_list(props["Tags"])
    sns = ctx.client("sns")
    arn = str(sns.create_topic(**args)["TopicArn"])
    for subscription in props.get("Subscription") or []:
        sns.subscribe(TopicArn=arn, Protocol=subscription["Protocol"], Endpoint=subscription["Endpoint"])
    return Resource(logical_id, "AWS::SNS::Topic", arn, {"TopicArn": arn, "TopicName": name}, arn)


PROVIDER = Provider(
    "AWS::SNS::Topic",
    frozenset({"TopicName", "Subscription", "Tags", *_ATTRIBUTES}),
    create,
    # Message archiving, data-protection audit and delivery-status logs: no effect on delivery.
    ignored=names("DataProtectionPolicy ArchivePolicy DeliveryStatusLogging FifoThroughputScope"),
)
