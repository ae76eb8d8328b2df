"""The times a workflow writes into the records, spelt as Step Functions gives them on AWS.

The workflows write ``$states.context.State.EnteredTime`` (``updatedAt``, a step's ``enteredAt``) and
``$now()`` beside the times the functions write with ``records.iso``; on AWS all three are ISO 8601
UTC with milliseconds and ``Z``, so the table's times compare as strings in time order. moto's
executor wrote ``EnteredTime`` as ``...+00:00`` with microseconds (sandbox/emulator/stepfunctions/clock.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from autopilot.logic.read_clusters import get_operation

from tests.integration.workflows import dependencies, start, wait

AWS_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_a_create_workflows_records_spell_every_time_as_aws_does(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.clock.advance(0.1234)  # not on a whole second: milliseconds, never microseconds
    operation_id = start()

    wait(stack, operation_id, advance=60.0)  # succeeded or failed, the workflow wrote its records

    operation = get_operation(dependencies(), operation_id)
    written = {
        "operation.createdAt": operation.created_at,  # the API's (records.iso)
        "operation.updatedAt": operation.updated_at,  # the workflow's EnteredTime
        **{f"step {step.name}": step.entered_at for step in operation.steps},  # EnteredTime and $now()
    }
    assert len(written) >= 4
    assert {name: at for name, at in written.items() if not AWS_TIME.fullmatch(at)} == {}


def test_the_api_and_the_workflow_write_their_times_on_one_clock(make_stack: Any) -> None:
    # the sandbox clock a month ahead of the wall: the API's createdAt (records.iso) and the workflow's
    # updatedAt ($states.context) must both be on it, or an operation "takes" a month
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.clock.advance(30 * 86400)
    started = stack.clock.now()
    operation_id = start()

    wait(stack, operation_id, advance=60.0)

    operation = get_operation(dependencies(), operation_id)
    created = datetime.fromisoformat(operation.created_at)
    updated = datetime.fromisoformat(operation.updated_at)
    assert abs(created - started) < timedelta(minutes=5)
    assert timedelta(0) <= updated - created < timedelta(days=1)
