"""The constrained types' own messages, and reading IAM trust policies."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from autopilot_config.models.constraints import IntRange, Text
from autopilot_config.validation import validate_config
from autopilot_config.validation.online import _trusts_sagemaker
from pydantic_core import PydanticCustomError

from tests.unit.validation.builders import changed, errors, messages_at, slurm_config, slurm_provisioning


def test_a_pattern_without_a_hint_is_quoted() -> None:
    with pytest.raises(PydanticCustomError) as raised:
        Text(1, 10, "[a-z]+").check("ABC")
    assert raised.value.message() == "must match the pattern [a-z]+"


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        (IntRange(1, 2), "must be 1 or 2"),
        (IntRange(0, 100), "must be between 0 and 100"),
        (IntRange(1, None), "must be at least 1"),
        (IntRange(None, 5), "must be at most 5"),
    ],
)
def test_integer_ranges_read_naturally(bounds: IntRange, message: str) -> None:
    assert bounds.message() == message


def test_an_open_ended_range_is_enforced_in_the_config() -> None:
    policy = {"MaximumBatchSize": {"Type": "INSTANCE_COUNT", "Value": 0}}
    update = {
        "ScheduleExpression": "cron(0 3 ? * SUN *)",
        "DeploymentConfig": {"RollingUpdatePolicy": policy},
    }
    config = changed(slurm_config(), ("InstanceGroups[2].ScheduledUpdateConfig", update))
    path = (
        "InstanceGroups[2].ScheduledUpdateConfig.DeploymentConfig.RollingUpdatePolicy.MaximumBatchSize.Value"
    )
    assert messages_at(errors(validate_config(config, slurm_provisioning())), path) == ["must be at least 1"]


def _trust(statement: Any) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": statement}


ALLOW = {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}


@pytest.mark.parametrize(
    ("document", "trusted"),
    [
        (_trust([ALLOW]), True),
        (_trust(ALLOW), True),
        (quote(json.dumps(_trust([ALLOW]))), True),
        (
            _trust([{**ALLOW, "Principal": {"Service": ["ec2.amazonaws.com", "sagemaker.amazonaws.com"]}}]),
            True,
        ),
        (_trust([{**ALLOW, "Action": ["sts:TagSession", "sts:AssumeRole"]}]), True),
        (_trust([{**ALLOW, "Effect": "Deny"}]), False),
        (_trust([{**ALLOW, "Action": "sts:AssumeRoleWithWebIdentity"}]), False),
        (_trust([{**ALLOW, "Principal": {"AWS": "arn:aws:iam::123456789012:root"}}]), False),
        (None, False),
    ],
)
def test_a_trust_policy_must_let_sagemaker_assume_the_role(document: Any, trusted: bool) -> None:
    assert _trusts_sagemaker(document) is trusted
