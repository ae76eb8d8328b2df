"""AWS::SNS::Subscription: Subscribe with the subscription attributes (filter policy, raw delivery…)."""

from __future__ import annotations

from typing import Any, Final

from ..context import Context, Provider, attributes, names
from ..stack import Resource

_ATTRIBUTES: Final = names(
    "FilterPolicy FilterPolicyScope RawMessageDelivery RedrivePolicy DeliveryPolicy"
    " SubscriptionRoleArn ReplayPolicy"
)


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    arn = ctx.client("sns").subscribe(
        TopicArn=props["TopicArn"],
        Protocol=props["Protocol"],
        Endpoint=str(props.get("Endpoint", "")),
        Attributes=attributes(props, _ATTRIBUTES),
        ReturnSubscriptionArn=True,
    )["SubscriptionArn"]
    return Resource(logical_id, "AWS::SNS::Subscription", arn, {"Arn": arn}, arn)


PROVIDER = Provider(
    "AWS::SNS::Subscription", frozenset({"TopicArn", "Protocol", "Endpoint", *_ATTRIBUTES}), create
)
