"""Step Functions' payload and history quotas in the sandbox, as AWS applies them.

AWS: "Step Functions service quotas" (256 KiB of input or output for a task, state or execution, as a
UTF-8 encoded string; 25,000 events in an execution's history), "Handling errors" (``States.ALL`` does
not catch the terminal ``States.DataLimitExceeded``); the history failure's shape is an observed
execution's (sandbox/emulator/stepfunctions/limits.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import limits as stepfunctions_limits
from sandbox.harness.core import Sandbox
from tests.sandbox.conftest import create_states_role

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
ROLE_NAME = "quota-workflows"
LIMIT = 262_144


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    clock = SandboxClock(speed=0, start=datetime(2030, 1, 1, tzinfo=UTC))
    with Sandbox(TEMPLATE, simulators=False, background=False, clock=clock, seed=11) as sandbox:
        create_states_role(sandbox, ROLE_NAME, ["lambda:InvokeFunction"])
        yield sandbox


def machine(sb: Sandbox, states: dict[str, Any]) -> str:
    definition = {"QueryLanguage": "JSONata", "StartAt": next(iter(states)), "States": states}
    return str(
        sb.client("stepfunctions").create_state_machine(
            name=f"m-{uuid.uuid4().hex[:12]}",
            definition=json.dumps(definition),
            roleArn=f"arn:aws:iam::{sb.account_id}:role/{ROLE_NAME}",
        )["stateMachineArn"]
    )


def run(sb: Sandbox, states: dict[str, Any], execution_input: str = "{}") -> dict[str, Any]:
    sfn = sb.client("stepfunctions")
    arn = sfn.start_execution(stateMachineArn=machine(sb, states), input=execution_input)["executionArn"]
    deadline = time.monotonic() + 60
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"{arn} still RUNNING"
        time.sleep(0.02)
    return dict(described)


def history(sb: Sandbox, arn: str) -> list[dict[str, Any]]:
    sfn = sb.client("stepfunctions")
    return [
        e
        for page in sfn.get_paginator("get_execution_history").paginate(executionArn=arn)
        for e in page["events"]
    ]


def output_of_size(size: int) -> dict[str, Any]:
    """A Pass state whose output is a JSON string of ``size`` bytes (its quotes included)."""
    return {"Type": "Pass", "Output": f"{{% $pad('', {size - 2}, 'x') %}}", "End": True}


def test_a_state_output_of_256_kib_passes_and_one_byte_more_fails(sb: Sandbox) -> None:
    assert run(sb, {"Big": output_of_size(LIMIT)})["status"] == "SUCCEEDED"
    failed = run(sb, {"Big": output_of_size(LIMIT + 1)})
    assert failed["status"] == "FAILED"
    assert failed["error"] == "States.DataLimitExceeded"
    assert failed["cause"] == (
        "The state/task 'Big' returned a result with a size exceeding the maximum number of bytes "
        "service limit."
    )


def test_the_size_is_the_json_text_in_utf_8(sb: Sandbox) -> None:
    # 'é' is 2 bytes in UTF-8 (moto counted it as the 6 characters of an escape)
    accented = {"Type": "Pass", "Output": f"{{% $pad('', {(LIMIT - 2) // 2}, 'é') %}}", "End": True}
    assert run(sb, {"Accented": accented})["status"] == "SUCCEEDED"
    assert stepfunctions_limits.payload_bytes({"a": "é"}) == len('{"a":"é"}'.encode())


def big_result_task(catch: list[str]) -> dict[str, Any]:
    """A Lambda task whose result (the echo of a 300 KB payload) is over the quota, caught by ``catch``."""
    return {
        "Invoke": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Arguments": {"FunctionName": "EchoFunction", "Payload": {"blob": "{% $pad('', 300000, 'x') %}"}},
            "Catch": [{"ErrorEquals": catch, "Next": "Caught"}],
            "End": True,
        },
        "Caught": {"Type": "Pass", "Output": {"error": "{% $states.input.Error %}"}, "End": True},
    }


def test_states_all_does_not_catch_data_limit_exceeded(sb: Sandbox) -> None:
    states = big_result_task(["States.ALL"])
    states["Invoke"]["Arguments"]["FunctionName"] = sb.stack.function("EchoFunction").arn
    failed = run(sb, states)
    assert failed["status"] == "FAILED", failed
    assert failed["error"] == "States.DataLimitExceeded"


def test_a_catch_naming_data_limit_exceeded_catches_it(sb: Sandbox) -> None:
    states = big_result_task(["States.DataLimitExceeded"])
    states["Invoke"]["Arguments"]["FunctionName"] = sb.stack.function("EchoFunction").arn
    caught = run(sb, states)
    assert caught["status"] == "SUCCEEDED", (caught, history(sb, caught["executionArn"])[-3:])
    assert json.loads(caught["output"]) == {"error": "States.DataLimitExceeded"}


def test_start_execution_refuses_an_input_over_256_kib(sb: Sandbox) -> None:
    sfn = sb.client("stepfunctions")
    arn = machine(sb, {"Done": {"Type": "Pass", "End": True}})
    at_limit = json.dumps("x" * (LIMIT - 2))
    assert sfn.start_execution(stateMachineArn=arn, input=at_limit)["executionArn"]
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=arn, input=json.dumps("x" * (LIMIT - 1)))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "less than or equal to 262144" in refused.value.response["Error"]["Message"]


LOOP: dict[str, Any] = {
    "Spin": {"Type": "Pass", "Assign": {"turns": "{% $exists($turns) ? $turns + 1 : 1 %}"}, "Next": "Again"},
    "Again": {"Type": "Choice", "Choices": [{"Condition": "{% true %}", "Next": "Spin"}], "Default": "Spin"},
}


def test_an_execution_fails_when_its_history_reaches_the_quota(
    sb: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stepfunctions_limits, "MAX_HISTORY_EVENTS", 60)
    failed = run(sb, LOOP)  # loops forever on moto
    assert failed["status"] == "FAILED"
    assert failed["error"] == "States.Runtime"
    assert failed["cause"] == "The execution reached the maximum number of history events (60)."
    events = history(sb, failed["executionArn"])
    assert [e["id"] for e in events] == list(range(1, 61))
    assert events[-1]["type"] == "ExecutionFailed"
    assert events[-1]["executionFailedEventDetails"] == {
        "error": "States.Runtime",
        "cause": "The execution reached the maximum number of history events (60).",
    }
    assert events[-2]["type"] != "ExecutionFailed"


def test_map_iterations_count_in_their_executions_history(
    sb: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stepfunctions_limits, "MAX_HISTORY_EVENTS", 40)
    mapped = {
        "Each": {
            "Type": "Map",
            "Items": "{% [1..50] %}",
            "ItemProcessor": {"StartAt": "One", "States": {"One": {"Type": "Pass", "End": True}}},
            "End": True,
        }
    }
    failed = run(sb, mapped)
    assert (failed["status"], failed["error"]) == ("FAILED", "States.Runtime")
    assert len(history(sb, failed["executionArn"])) == 40


def test_the_quota_is_25000_events(sb: Sandbox) -> None:
    assert stepfunctions_limits.MAX_HISTORY_EVENTS == 25_000
    finished = run(sb, {"Done": {"Type": "Pass", "End": True}})
    assert finished["status"] == "SUCCEEDED"  # a short execution is far from it
