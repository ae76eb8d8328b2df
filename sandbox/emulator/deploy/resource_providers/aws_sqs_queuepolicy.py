"""AWS::SQS::QueuePolicy: the Policy attribute of each queue."""

from __future__ import annotations

import json
from typing import Any

from ..context import Context, Provider
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    for url in props["Queues"]:
        ctx.client("sqs").set_queue_attributes(
            QueueUrl=url, Attributes={"Policy": json.dumps(props["PolicyDocument"])}
        )
    return Resource(logical_id, "AWS::SQS::QueuePolicy", logical_id, {"Id": logical_id})


PROVIDER = Provider("AWS::SQS::QueuePolicy", frozenset({"PolicyDocument", "Queues"}), create)
