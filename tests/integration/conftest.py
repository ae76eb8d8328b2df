"""Fixtures of the workflow tests: the template deployed into moto, executing Step Functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.settings import api_settings

from sandbox import seams
from tests.events.stack import Deployed, deployed


@pytest.fixture
def make_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    contexts: list[Any] = []

    def make(clock_speed: float, **parameters: Any) -> Deployed:
        context = deployed(execute=True, parameters=parameters, clock_speed=clock_speed)
        stack = context.__enter__()
        contexts.append(context)
        # the workflows are JSONata, their timers on the stack's clock (as in the sandbox)
        jsonata = seams.installed(
            seams.evaluate_stepfunctions_jsonata,
            seams.run_stepfunctions_on_sandbox_clock,
            seams.keep_event_account,
            clock=stack.clock,
        )
        jsonata.__enter__()
        contexts.append(jsonata)
        for key, value in stack.environment().items():
            monkeypatch.setenv(key, value)
        api_settings.cache_clear()
        routes.get_dependencies.cache_clear()
        aws.client.cache_clear()
        return stack

    yield make
    for context in reversed(contexts):
        context.__exit__(None, None, None)
    aws.client.cache_clear()
