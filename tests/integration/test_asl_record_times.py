"""The times a workflow writes into the records, spelt as Step Functions gives them on AWS.

The workflows write ``$states.context.State.EnteredTime`` (``updatedAt``, a step's ``enteredAt``) and
``$now()`` beside the times the functions write with ``records.iso``; on AWS all three are ISO 8601
UTC with milliseconds and ``Z``, so the table's times compare as strings in time order. moto's
executor wrote ``EnteredTime`` as ``...+00:00`` with microseconds (sandbox/emulator/stepfunctions/clock.py).
The spelling is read from the stored item itself: the records hold datetimes, which the API writes
back in one spelling whatever the table held.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from autopilot.dal.table import key_attributes, operation_key
from autopilot.logic.read_clusters import get_operation

from tests.integration.workflows import dependencies, start, wait

AWS_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def test_a_create_workflows_records_spell_every_time_as_aws_does(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.clock.advance(0.1234)  # not on a whole second: milliseconds, never microseconds
    operation_id = start()

    wait(stack, operation_id, advance=60.0)  # succeeded or failed, the workflow wrote its records

    item = stack.client("dynamodb").get_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key=key_attributes(operation_key(operation_id)),
        ConsistentRead=True,
    )["Item"]
    written = {
        "operation.createdAt": item["createdAt"]["S"],  # the API's (records.iso)
        "operation.updatedAt": item["updatedAt"]["S"],  # the workflow's EnteredTime
        # EnteredTime and $now()
        **{f"step {step['M']['name']['S']}": step["M"]["enteredAt"]["S"] for step in item["steps"]["L"]},
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
    created, updated = operation.created_at, operation.updated_at
    assert abs(created - started) < timedelta(minutes=5)
    assert timedelta(0) <= updated - created < timedelta(days=1)
