"""The test_ssm_sessions_* modules' shared setup: the SSM sessions simulator on a frozen clock, its client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.ssm_sessions import SsmSessionsSimulator

REGION = "us-east-1"
ACCOUNT = "123456789012"
START = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)
TARGET = "sagemaker-cluster:a1b2c3d4e5f6_worker-group-1-i-0123456789abcdef0"
OTHER_TARGET = "sagemaker-cluster:a1b2c3d4e5f6_worker-group-1-i-0fedcba9876543210"
CLOUDTRAIL_START_SESSION = {
    "source": ["aws.ssm"],
    "detail-type": ["AWS API Call via CloudTrail"],
    "detail": {"eventSource": ["ssm.amazonaws.com"], "eventName": ["StartSession"]},
}


@pytest.fixture
def ssm_clock() -> SandboxClock:
    return SandboxClock(speed=0, start=START)


def connected(account_id: str, region: str) -> list[str]:
    """Both test targets are connected, in every account and region."""
    return [TARGET, OTHER_TARGET]


@pytest.fixture
def ssm_sim(iam_keys_env: None, ssm_clock: SandboxClock) -> Iterator[SsmSessionsSimulator]:
    with (
        mock_aws(),
        SsmSessionsSimulator(
            ssm_clock, region=REGION, account_id=ACCOUNT, connected_targets=connected
        ) as simulator,
    ):
        yield simulator


@pytest.fixture
def ssm(ssm_sim: SsmSessionsSimulator) -> Any:
    return boto3.client("ssm", region_name=REGION)


def iam_user_client(name: str) -> tuple[Any, str]:
    """A client signed with a fresh moto IAM user's keys, and that user's ARN."""
    iam = boto3.client("iam", region_name=REGION)
    arn = iam.create_user(UserName=name)["User"]["Arn"]
    key = iam.create_access_key(UserName=name)["AccessKey"]
    client = boto3.client(
        "ssm",
        region_name=REGION,
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    return client, arn


def error_of(excinfo: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = excinfo.value.response["Error"]
    return error["Code"], error["Message"]
