"""The seams in installation order, and installing / removing them (all for a Sandbox, or the chosen
ones for a test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.lambda_runtime import LambdaRuntime
from sandbox.emulator.seams.base import WALL_CLOCK, lock, state, use_clock
from sandbox.emulator.seams.calls import intercept_aws_calls, record_aws_calls
from sandbox.emulator.seams.dynamodb import back_up_transaction_items, serialize_dynamodb_writes
from sandbox.emulator.seams.elbv2 import hold_elbv2_targets_as_aws
from sandbox.emulator.seams.eventbridge import (
    deliver_eventbridge_targets,
    keep_event_account,
    refuse_aws_event_sources,
)
from sandbox.emulator.seams.lambda_delivery import detach_sqs_event_source_mappings, route_lambda_invoke
from sandbox.emulator.seams.sns import deliver_sns_to_lambda
from sandbox.emulator.seams.stepfunctions import (
    abort_stopped_executions,
    apply_stepfunctions_quotas,
    bind_execution_role,
    cache_stepfunctions_parse_trees,
    emit_execution_status_events,
    evaluate_stepfunctions_jsonata,
    fail_tasks_on_read_timeouts,
    keep_task_failure_cause,
    name_aws_sdk_errors,
    name_unnamed_executions,
    run_product_code_on_sandbox_clock,
    run_stepfunctions_on_sandbox_clock,
)

SEAMS: Final = (
    route_lambda_invoke,
    deliver_eventbridge_targets,
    refuse_aws_event_sources,
    keep_event_account,
    deliver_sns_to_lambda,
    detach_sqs_event_source_mappings,
    name_unnamed_executions,
    name_aws_sdk_errors,
    bind_execution_role,
    evaluate_stepfunctions_jsonata,
    run_stepfunctions_on_sandbox_clock,
    run_product_code_on_sandbox_clock,
    emit_execution_status_events,
    abort_stopped_executions,
    fail_tasks_on_read_timeouts,
    keep_task_failure_cause,
    apply_stepfunctions_quotas,
    cache_stepfunctions_parse_trees,
    hold_elbv2_targets_as_aws,
    record_aws_calls,
    intercept_aws_calls,
    back_up_transaction_items,  # before serialize_dynamodb_writes wraps the method it checks
    serialize_dynamodb_writes,
)


def install(runtime: LambdaRuntime, clock: SandboxClock | None = None) -> None:
    """Install every seam, routing to ``runtime`` (one sandbox at a time); Step Functions timers
    run on ``clock`` (wall time without one)."""
    with lock:
        if state.runtime is not None:
            raise RuntimeError("another sandbox is already running in this process")
        try:
            use_clock(clock or WALL_CLOCK)
            for seam in SEAMS:
                seam()
        except BaseException:
            _undo_all()
            raise
        state.runtime = runtime
        state.deliveries.clear()
        state.delivery_errors.clear()


def uninstall() -> None:
    with lock:
        _undo_all()


@contextmanager
def installed(
    *chosen: Callable[[], None], clock: SandboxClock | None = None, runtime: LambdaRuntime | None = None
) -> Iterator[None]:
    """Only the ``chosen`` seams, for tests that run moto without a Sandbox (without ``runtime`` the
    seams that route to one keep moto's behaviour; with it, ``route_lambda_invoke`` runs its functions
    in-process; Step Functions timers on ``clock``, else the enclosing one, else wall time). Nests
    (the innermost one may bring a runtime); refused while a sandbox is running."""
    with lock:
        if state.runtime is not None:
            raise RuntimeError("a sandbox is running: its seams are already installed")
        mark = len(state.undo)
        try:
            if clock is not None:
                use_clock(clock)
            for seam in chosen:
                seam()
        except BaseException:
            _undo_to(mark)
            raise
        state.runtime = runtime
    try:
        yield
    finally:
        with lock:
            state.runtime = None
            _undo_to(mark)


def _undo_to(mark: int) -> None:
    while len(state.undo) > mark:
        state.undo.pop()()


def _undo_all() -> None:
    _undo_to(0)
    state.runtime = None


def active_runtime() -> LambdaRuntime | None:
    return state.runtime


def delivery_errors() -> list[str]:
    return list(state.delivery_errors)
