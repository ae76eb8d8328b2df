"""Fixtures of the workflow tests: the template deployed into moto, executing Step Functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.settings import api_settings

from sandbox import seams
from sandbox.aws_calls import AwsCalls
from tests.events.stack import Deployed, deployed


@pytest.fixture
def make_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    contexts: list[Any] = []

    def make(clock_speed: float, **parameters: Any) -> Deployed:
        context = deployed(execute=True, parameters=parameters, clock_speed=clock_speed)
        stack = context.__enter__()
        contexts.append(context)
        # the workflows are JSONata, their timers on the stack's clock; their calls are checked against
        # their roles and can be faulted (stack.aws_calls), as in the sandbox
        installed = seams.installed(
            seams.evaluate_stepfunctions_jsonata,
            seams.run_stepfunctions_on_sandbox_clock,
            seams.keep_event_account,
            seams.bind_execution_role,
            seams.intercept_aws_calls,
            clock=stack.clock,
        )
        installed.__enter__()
        contexts.append(installed)
        stack.aws_calls = AwsCalls(wall_seconds=lambda _: 0.0)
        stack.aws_calls.start()
        contexts.append(_Stopping(stack.aws_calls))
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


class _Stopping:
    """``AwsCalls.stop`` as a context exit, unwound with the seams."""

    def __init__(self, calls: AwsCalls) -> None:
        self._calls = calls

    def __exit__(self, *_: object) -> None:
        self._calls.stop()
