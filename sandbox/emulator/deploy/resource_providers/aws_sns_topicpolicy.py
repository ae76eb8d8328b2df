"""AWS::SNS::TopicPolicy: the Policy attribute of each topic."""

from __future__ import annotations

import json
from typing import Any

from ..context import Context, Provider
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    for topic in props["Topics"]:
        ctx.client("sns").set_topic_attributes(
            TopicArn=topic, AttributeName="Policy", AttributeValue=json.dumps(props["PolicyDocument"])
        )
    return Resource(logical_id, "AWS::SNS::TopicPolicy", logical_id, {"Id": logical_id})


PROVIDER = Provider("AWS::SNS::TopicPolicy", frozenset({"PolicyDocument", "Topics"}), create)
