"""moto's Step Functions, with the seams, sends "Step Functions Execution Status Change" events shaped as
AWS's samples (events/stepfunctions/): compared member by member and JSON type by type; StopExecution
ends an execution ABORTED even while it waits for a task token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import events as stepfunctions_events
from sandbox.emulator.stepfunctions import stop as stepfunctions_stop
from tests.sandbox.conftest import TEST_REGION, Drain

SAMPLES = Path(__file__).resolve().parents[2] / "events" / "stepfunctions"
ROLE = "arn:aws:iam::123456789012:role/sfn"
# members AWS's samples lack that DescribeExecution has, and the sandbox adds when the execution has them
DESCRIBE_ONLY = {"error", "cause"}


def sample(status: str) -> dict[str, Any]:
    name = {"RUNNING": "started", "SUCCEEDED": "succeeded", "FAILED": "failed", "ABORTED": "aborted"}[status]
    loaded: dict[str, Any] = json.loads((SAMPLES / f"execution_{name}.json").read_text())
    return loaded


def json_type(value: Any) -> str:
    return type(value).__name__


def shape(value: Any) -> Any:
    """Each member's JSON type, recursively (what the comparison holds the sandbox to)."""
    if isinstance(value, dict):
        return {key: shape(member) for key, member in value.items()}
    return json_type(value)


@pytest.fixture
def sfn(capture_events: Callable[[str, dict[str, Any]], Drain]) -> Iterator[tuple[Any, Drain]]:
    with (
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
        seams.installed(
            seams.emit_execution_status_events, seams.abort_stopped_executions, clock=SandboxClock(speed=0)
        ),
    ):
        drain = capture_events("sfn-status", {"source": ["aws.states"]})
        yield boto3.client("stepfunctions", region_name=TEST_REGION), drain


def machine(client: Any, name: str, definition: dict[str, Any], kind: str = "STANDARD") -> str:
    return str(
        client.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE, type=kind)[
            "stateMachineArn"
        ]
    )


def events_until(drain: Drain, count: int) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while len(received) < count and time.monotonic() < deadline:
        received += drain()
        time.sleep(0.02)
    return received


def test_a_succeeded_and_a_failed_execution_send_aws_shaped_events(sfn: tuple[Any, Drain]) -> None:
    client, drain = sfn
    ok = machine(client, "ok", {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    bad = machine(
        client,
        "bad",
        {"StartAt": "Boom", "States": {"Boom": {"Type": "Fail", "Error": "E.x", "Cause": "why"}}},
    )

    started = client.start_execution(stateMachineArn=ok, name="run-1", input='{"a": 1}')["executionArn"]
    failed = client.start_execution(stateMachineArn=bad, name="run-2")["executionArn"]
    events = events_until(drain, 4)

    by_status = {(e["detail"]["executionArn"], e["detail"]["status"]): e for e in events}
    assert set(by_status) == {
        (started, "RUNNING"), (started, "SUCCEEDED"), (failed, "RUNNING"), (failed, "FAILED"),
    }  # fmt: skip
    for (arn, status), event in by_status.items():
        expected = sample(status)
        assert set(event) == set(expected)
        assert event["detail-type"] == "Step Functions Execution Status Change"
        assert event["source"] == "aws.states"
        assert event["resources"] == [arn]
        extra = DESCRIBE_ONLY & set(event["detail"])
        assert shape({k: v for k, v in event["detail"].items() if k not in extra}) == shape(
            expected["detail"]
        )
    succeeded = by_status[(started, "SUCCEEDED")]["detail"]
    assert (succeeded["name"], succeeded["stateMachineArn"], succeeded["input"]) == ("run-1", ok, '{"a":1}')
    assert succeeded["output"] == '{"a":1}'
    assert succeeded["stopDate"] >= succeeded["startDate"]
    failure = by_status[(failed, "FAILED")]["detail"]
    assert (failure["error"], failure["cause"]) == ("E.x", "why")  # as DescribeExecution has them


def test_a_stopped_execution_sends_aborted(sfn: tuple[Any, Drain]) -> None:
    client, drain = sfn
    waits = machine(
        client, "waits", {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    )
    arn = client.start_execution(stateMachineArn=waits, name="run-3")["executionArn"]
    assert [e["detail"]["status"] for e in events_until(drain, 1)] == ["RUNNING"]

    client.stop_execution(executionArn=arn)
    events = events_until(drain, 1)

    assert [e["detail"]["status"] for e in events] == ["ABORTED"]
    assert shape(events[0]["detail"]) == shape(sample("ABORTED")["detail"])


def test_a_stopped_execution_waiting_for_a_task_token_ends_aborted(sfn: tuple[Any, Drain]) -> None:
    client, drain = sfn
    queue = boto3.client("sqs", region_name=TEST_REGION).create_queue(QueueName="tokens")["QueueUrl"]
    awaits = {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
        # without the seam the interrupted wait's error would be caught, or would end it FAILED
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Failed"}],
        "End": True,
    }
    definition = {
        "StartAt": "Await",
        "States": {"Await": awaits, "Failed": {"Type": "Fail", "Error": "Caught"}},
    }
    arn = client.start_execution(stateMachineArn=machine(client, "token", definition), name="run-4")[
        "executionArn"
    ]
    assert [e["detail"]["status"] for e in events_until(drain, 1)] == ["RUNNING"]

    client.stop_execution(executionArn=arn)
    events = events_until(drain, 1)

    assert [e["detail"]["status"] for e in events] == ["ABORTED"]
    assert client.describe_execution(executionArn=arn)["status"] == "ABORTED"


def test_express_executions_send_none(sfn: tuple[Any, Drain]) -> None:
    client, drain = sfn
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    express = machine(client, "fast", definition, kind="EXPRESS")
    standard = machine(client, "slow", definition)

    client.start_execution(stateMachineArn=express)
    after = client.start_execution(stateMachineArn=standard)["executionArn"]
    events = events_until(drain, 2)  # the Standard execution's two, sent after any of the Express one's

    assert {e["detail"]["executionArn"] for e in events} == {after}


def test_the_stop_seam_refuses_a_moved_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.backend.execution import Execution  # noqa: PLC0415

    monkeypatch.setattr(Execution, "stop", lambda self, stop_date: None)

    with pytest.raises(seams.SeamDrift, match="abort_stopped_executions"):
        stepfunctions_stop.install()


def test_the_seam_refuses_a_moved_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.backend.execution import Execution  # noqa: PLC0415

    monkeypatch.setattr(Execution, "start", lambda self, extra: None)

    with pytest.raises(seams.SeamDrift, match="emit_execution_status_events"):
        stepfunctions_events.install()
