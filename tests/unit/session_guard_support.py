"""What SessionGuard's tests share (test_session_guard*.py): the account, the clock's start, a registered
HyperPod cluster's node targets and an EC2 instance, a user's ARN, and CloudTrail's StartSession record
(events/ssm) as the rule delivers it."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from autopilot.models.sessions import StartSessionCall, StartSessionEvent

from tests.samples import load_event

ACCOUNT = "123456789012"
START = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
CLUSTER_ID = "abcd1234efgh"
NODES = [f"sagemaker-cluster:{CLUSTER_ID}_worker-group-1-i-0{n:016x}" for n in range(1, 5)]
EC2_INSTANCE = "i-0bbbbbbbbbbbbbbbb"


def user_arn(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:user/{name}"


def start_session_call(**detail: Any) -> StartSessionCall:
    event = copy.deepcopy(load_event("ssm/start_session.json"))
    event["detail"].update(detail)
    return StartSessionEvent.model_validate(event).detail
