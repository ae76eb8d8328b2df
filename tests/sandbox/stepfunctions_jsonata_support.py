"""The test_stepfunctions_jsonata_{fields,states,clock} modules' sandbox and helpers to run an execution.

AWS sources: "Transforming data with JSONata in Step Functions" and "Passing data between states
with variables" (Step Functions developer guide). Where AWS does not say, a real execution's error
is quoted (see docs/sandbox.md, Step Functions).
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

from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from tests.sandbox.conftest import create_states_role

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
ROLE_NAME = "jsonata-workflows"
ROLE = f"arn:aws:iam::123456789012:role/{ROLE_NAME}"
START = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    """A sandbox whose clock stands still (speed 0) until a test advances it, years from wall time."""
    clock = SandboxClock(speed=0, start=START)
    with Sandbox(TEMPLATE, simulators=False, background=False, clock=clock, seed=5) as sandbox:
        create_states_role(sandbox, ROLE_NAME, ["sqs:*", "lambda:InvokeFunction"])
        yield sandbox


class Run:
    def __init__(self, sb: Sandbox, described: dict[str, Any]) -> None:
        self.sb = sb
        self.arn = str(described["executionArn"])
        self.status = str(described["status"])
        self.output: Any = json.loads(described["output"]) if described.get("output") else None
        self.error = described.get("error")
        self.cause = described.get("cause")

    def history(self) -> list[dict[str, Any]]:
        sfn = self.sb.client("stepfunctions")
        return list(sfn.get_execution_history(executionArn=self.arn, maxResults=1000)["events"])

    def entered(self, state: str) -> datetime:
        """When ``state`` was (last) entered, by the execution history."""
        times = [
            event["timestamp"]
            for event in self.history()
            if event.get("stateEnteredEventDetails", {}).get("name") == state
        ]
        assert times, f"{state} never entered"
        return times[-1]  # type: ignore[no-any-return]


def start(sb: Sandbox, definition: dict[str, Any], execution_input: Any = None) -> str:
    sfn = sb.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=f"m-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition), roleArn=ROLE
    )["stateMachineArn"]
    return str(
        sfn.start_execution(stateMachineArn=machine, input=json.dumps(execution_input or {}))["executionArn"]
    )


def finish(sb: Sandbox, arn: str, *, advance: float = 0.0, timeout: float = 30.0) -> Run:
    """Wait (wall deadline) for the execution to end, moving the frozen clock ``advance`` simulated
    seconds at a time meanwhile (0: the clock stands still)."""
    sfn = sb.client("stepfunctions")
    deadline = time.monotonic() + timeout
    while True:
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return Run(sb, described)
        assert time.monotonic() < deadline, f"{arn} still RUNNING after {timeout} s"
        if advance:
            sb.clock.advance(advance)
        time.sleep(0.01)


def run(sb: Sandbox, definition: dict[str, Any], execution_input: Any = None, **options: Any) -> Run:
    return finish(sb, start(sb, definition, execution_input), **options)


def jsonata(states: dict[str, Any], start_at: str | None = None) -> dict[str, Any]:
    return {"QueryLanguage": "JSONata", "StartAt": start_at or next(iter(states)), "States": states}


def output_of(sb: Sandbox, expression: Any, execution_input: Any = None) -> Any:
    """The output of one JSONata Pass state whose Output is ``expression``."""
    result = run(sb, jsonata({"P": {"Type": "Pass", "Output": expression, "End": True}}), execution_input)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    return result.output
