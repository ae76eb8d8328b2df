"""ApiFunction's AWS calls give up before API Gateway's 29 s integration timeout (issue 20, finding 8):
a call that retries past it turns into a 504 for a request that may still take effect."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from autopilot import aws
from botocore.retries.standard import ExponentialBackoff

ROOT = Path(__file__).resolve().parents[2]
API_GATEWAY_TIMEOUT_SECONDS = 29
BUDGET_SECONDS = 25  # what is left of the 29 s for the function's own work


@pytest.fixture
def api_function_loaded() -> Iterator[None]:
    """functions/api/app.py imported as Lambda imports it; the process's client config restored after."""
    spec = importlib.util.spec_from_file_location("api_app_deadline", ROOT / "functions" / "api" / "app.py")
    assert spec is not None
    assert spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    yield
    aws.use_config(aws.DEFAULT_CONFIG)


def worst_case_seconds(service: str) -> float:
    """Every attempt waits out its connect and read timeouts, and every retry waits the longest
    throttling backoff botocore's standard mode may draw (its own ExponentialBackoff, jitter at 1)."""
    config = aws.client(service, "us-east-1").meta.config
    attempts = int(config.retries["total_max_attempts"])
    throttled: Any = SimpleNamespace(is_throttling_error_from_context=lambda context: True)
    backoff = ExponentialBackoff(random=lambda: 1.0, throttling_detector=throttled)
    retries: list[Any] = [SimpleNamespace(attempt_number=n, http_response=None) for n in range(1, attempts)]
    waits = sum(float(backoff.delay_amount(retry)) for retry in retries)
    return float(attempts * (config.connect_timeout + config.read_timeout) + waits)


@pytest.mark.usefixtures("api_function_loaded")
@pytest.mark.parametrize("service", ["dynamodb", "sagemaker", "stepfunctions"])
def test_the_apis_aws_calls_retry_within_the_gateway_timeout(service: str) -> None:
    assert worst_case_seconds(service) <= BUDGET_SECONDS < API_GATEWAY_TIMEOUT_SECONDS


def test_other_functions_keep_the_patient_default() -> None:
    # Step Functions tasks and schedules have no caller waiting: more attempts, longer timeouts.
    config = aws.client("sagemaker", "us-east-1").meta.config
    assert config.retries["total_max_attempts"] == 6
