"""The seams IAM enforcement and faults stand on detect when moto moves (sandbox.emulator.seams)."""

from __future__ import annotations

import sys
from typing import Any

import boto3
import botocore.handlers
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.models import botocore_stubber
from moto.stepfunctions.parser.asl.component.state.exec.state_task.credentials import StateCredentials
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
)
from moto.stepfunctions.parser.asl.utils import boto_client

from sandbox.emulator import seams
from sandbox.emulator.lambda_runtime import LambdaRuntime

ORIGINAL = boto_client.boto_client_for


def _importers() -> list[str]:
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions") and getattr(module, "boto_client_for", None) is ORIGINAL
    )


def test_bind_execution_role_replaces_every_reference_and_restores_them() -> None:
    before = _importers()
    assert "moto.stepfunctions.parser.asl.utils.boto_client" in before
    with seams.installed(seams.bind_execution_role):
        assert _importers() == []
    assert _importers() == before


def test_aws_sdk_task_clients_are_one_per_region_service_and_role() -> None:
    """Step Functions' aws-sdk tasks reuse a client, but never one bound to another role: its calls
    would be authorized as that role."""

    def role(name: str) -> Any:
        return StateCredentials(role_arn=f"arn:aws:iam::123456789012:role/{name}")

    with seams.installed(seams.bind_execution_role):
        client_for = vars(state_task_service_aws_sdk)["boto_client_for"]
        first = client_for("us-east-1", "sagemaker", role("a"))
        assert client_for("us-east-1", "sagemaker", role("a")) is first
        assert client_for("us-east-1", "sagemaker", role("b")) is not first
        assert client_for("us-west-2", "sagemaker", role("a")) is not first
        assert client_for("us-east-1", "dynamodb", role("a")) is not first
    assert vars(state_task_service_aws_sdk)["boto_client_for"] is ORIGINAL


def test_bind_execution_role_detects_a_changed_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    def boto_client_for(region: str, service: str, credentials: Any = None) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(boto_client, "boto_client_for", boto_client_for)
    with pytest.raises(seams.SeamDrift, match="boto_client_for has parameters"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


def test_intercept_aws_calls_detects_a_moved_stubber(monkeypatch: pytest.MonkeyPatch) -> None:
    without = [h for h in botocore.handlers.BUILTIN_HANDLERS if h != ("before-send", botocore_stubber)]
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", without)
    with pytest.raises(seams.SeamDrift, match="BotocoreStubber"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


def test_intercept_aws_calls_restores_moto_stubber() -> None:
    before = BotocoreStubber.__dict__["__call__"]
    with seams.installed(seams.intercept_aws_calls):
        assert BotocoreStubber.__dict__["__call__"] is not before
    assert BotocoreStubber.__dict__["__call__"] is before


def test_intercept_aws_calls_detects_a_changed_stubber_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    def call(self: BotocoreStubber, request: Any) -> Any:
        raise AssertionError("never called")

    monkeypatch.setattr(BotocoreStubber, "__call__", call)
    with pytest.raises(seams.SeamDrift, match="__call__ has parameters"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


def test_call_counts_start_from_zero_at_each_install(iam_keys_env: None) -> None:
    """A sandbox's deploy counts (Sandbox.deploy_calls) are its own, not an earlier sandbox's calls."""
    with seams.installed(seams.record_aws_calls), mock_aws():
        boto3.client("sqs", region_name="us-east-1").list_queues()
        assert seams.aws_calls()["sqs:ListQueues"] == 1
    with seams.installed(seams.record_aws_calls):
        assert "sqs:ListQueues" not in seams.aws_calls()
