"""Fixtures of the workflow tests: the template deployed into moto, executing Step Functions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.settings import api_settings

from sandbox.emulator import seams
from sandbox.emulator.aws_calls import AwsCalls
from sandbox.emulator.lambda_runtime import LambdaRuntime
from sandbox.emulator.stepfunctions import clock as stepfunctions_clock
from sandbox.harness.stack import ACCOUNT, Deployed, deployed

# The functions the workflows invoke themselves (lambda:invoke tasks).
WORKFLOW_FUNCTIONS = (
    "CostTaggerFunction",
    "DiagnoseFailureFunction",
    "AgentFunction",
    "LoginTargetsFunction",
)


@pytest.fixture
def make_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    contexts: list[Any] = []

    def make(clock_speed: float, **parameters: Any) -> Deployed:
        context = deployed(execute=True, parameters=parameters, clock_speed=clock_speed)
        stack = context.__enter__()
        contexts.append(context)
        # the workflows are JSONata, their timers on the stack's clock; their calls are checked against
        # their roles and can be faulted (stack.aws_calls), as in the sandbox; the functions their
        # lambda:invoke tasks call run in-process (only those: the tests play the event consumers)
        runtime = LambdaRuntime(region=stack.stack.region, account_id=ACCOUNT)
        for logical_id in WORKFLOW_FUNCTIONS:
            runtime.register(stack.stack.function(logical_id))
        contexts.append(_Stopping(runtime))
        installed = seams.installed(
            seams.evaluate_stepfunctions_jsonata,
            seams.run_stepfunctions_on_sandbox_clock,
            seams.run_product_code_on_sandbox_clock,  # the layer reads the same clock
            seams.apply_stepfunctions_quotas,  # payloads and histories limited as on AWS
            seams.keep_event_account,
            seams.bind_execution_role,
            seams.intercept_aws_calls,
            seams.fail_tasks_on_read_timeouts,
            seams.keep_task_failure_cause,  # the Slurm agent's failures carry their cause
            seams.route_lambda_invoke,
            seams.serialize_dynamodb_writes,
            seams.hold_elbv2_targets_as_aws,  # login target groups as ELBv2 keeps them
            clock=stack.clock,
            runtime=runtime,
        )
        installed.__enter__()
        contexts.append(installed)
        stack.aws_calls = AwsCalls(sleep_simulated=lambda _: None)
        stack.aws_calls.start()
        stack.blocked_before = stepfunctions_clock.blocked_threads()
        contexts.append(_Stopping(stack.aws_calls))
        for key, value in stack.environment().items():
            monkeypatch.setenv(key, value)
        api_settings.cache_clear()
        routes.deps.cache_clear()
        aws.client.cache_clear()
        return stack

    yield make
    for context in reversed(contexts):
        context.__exit__(None, None, None)
    aws.client.cache_clear()


class _Stopping:
    """``stop()`` (AwsCalls, LambdaRuntime) as a context exit, unwound with the seams."""

    def __init__(self, stoppable: AwsCalls | LambdaRuntime) -> None:
        self._stoppable = stoppable

    def __exit__(self, *_: object) -> None:
        self._stoppable.stop()
