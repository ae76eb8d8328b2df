"""Put an event on moto's EventBridge bus, so rules match with moto's real pattern matcher."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.events.models import events_backends


def emit(
    source: str,
    detail_type: str,
    detail: dict[str, Any],
    *,
    resources: list[str] | None = None,
    region: str = "us-east-1",
    account_id: str = DEFAULT_ACCOUNT_ID,
    time: datetime | None = None,
    bus: str = "default",
) -> str:
    """Emit one event the way the AWS service itself would (not via the PutEvents API). Returns its id."""
    entry: dict[str, Any] = {
        "Source": source,
        "DetailType": detail_type,
        "Detail": json.dumps(detail, default=str),
        "Resources": resources or [],
        "EventBusName": bus,
    }
    if time is not None:
        entry["Time"] = time.timestamp()
    result = events_backends[account_id][region].put_events([entry])[0]
    if "EventId" not in result:
        raise ValueError(f"event rejected by EventBridge: {result}")
    return str(result["EventId"])


def let_rule_send_to_queue(sqs: Any, queue_url: str, queue_arn: str, rule_arn: str) -> None:
    """Give a queue the policy EventBridge needs to deliver a rule's events to it: as on AWS, an SQS
    target whose queue policy does not allow ``events.amazonaws.com`` for the rule gets nothing (the
    console adds this statement itself; PutTargets through the API does not)."""
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
            }
        ],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
