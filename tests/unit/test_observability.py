"""The tracer: X-Ray when tracing is on, no X-Ray SDK import when Powertools would disable tracing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from autopilot.observability import UntracedProvider
from aws_lambda_powertools import Tracer

from tests.events import ROOT

# In a fresh interpreter (the tracer is built at import, and Powertools caches its config per class):
# how autopilot's tracer came out, then what a plain Tracer() decides in the same environment.
_PROBE = """
import json, sys
from autopilot.observability import tracer
from aws_lambda_powertools import Tracer
ours = {"disabled": bool(tracer.disabled), "provider": type(tracer.provider).__module__,
        "xray_imported": "aws_xray_sdk.core" in sys.modules}
Tracer._reset_config()
print(json.dumps({**ours, "powertools_disabled": bool(Tracer().disabled)}))
"""

IN_LAMBDA = {"LAMBDA_TASK_ROOT": "/var/task"}


def _tracer_in(environment: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_", "LAMBDA_"))}
    env.update(
        {
            "AWS_REGION": "us-east-1",
            "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
            "PYTHONPATH": str(ROOT / "layers" / "autopilot"),
            **environment,
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True, timeout=60
    )
    probed: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return probed


@pytest.mark.parametrize(
    "environment",
    [
        pytest.param({}, id="outside Lambda"),
        pytest.param({**IN_LAMBDA, "AWS_SAM_LOCAL": "true"}, id="sam local"),
        pytest.param({**IN_LAMBDA, "POWERTOOLS_TRACE_DISABLED": "true"}, id="disabled by env"),
    ],
)
def test_without_tracing_the_xray_sdk_is_not_imported(environment: dict[str, str]) -> None:
    probed = _tracer_in(environment)

    assert probed["disabled"] is True
    assert probed["powertools_disabled"] is True
    assert probed["provider"] == UntracedProvider.__module__
    assert probed["xray_imported"] is False


def test_in_lambda_with_tracing_the_tracer_is_xray() -> None:
    probed = _tracer_in(IN_LAMBDA)

    assert probed["disabled"] is False
    assert probed["powertools_disabled"] is False
    assert str(probed["provider"]).startswith("aws_xray_sdk")
    assert probed["xray_imported"] is True


def test_an_untraced_tracer_runs_decorated_code_and_passes_errors_on() -> None:
    Tracer._reset_config()
    try:
        tracer = Tracer(disabled=True, provider=UntracedProvider())

        @tracer.capture_lambda_handler
        def handler(event: dict[str, int], context: object) -> int:
            return event["n"] * 2

        @tracer.capture_method
        async def fetch(n: int) -> int:
            return n + 1

        @tracer.capture_method
        def explode() -> None:
            raise ValueError("boom")

        assert handler({"n": 21}, None) == 42
        assert asyncio.run(fetch(1)) == 2
        with pytest.raises(ValueError, match="boom"):
            explode()
        tracer.put_annotation("cluster", "ml-cluster")
        tracer.put_metadata("request", {"n": 1})
        tracer.patch(["boto3"])
        with tracer.provider.in_subsegment("## step") as segment:
            segment.put_annotation("k", "v")
            segment.put_metadata("k", "v")
            segment.add_subsegment(None)
            segment.remove_subsegment(None)
            segment.add_exception(ValueError("x"), [])
            segment.close()
    finally:
        Tracer._reset_config()
