"""Task tokens, timers and timestamps of JSONata workflows on the sandbox clock, as AWS documents them."""

# ruff: noqa: F811  (the tests name fixtures imported from stepfunctions_jsonata_support.py)
from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sandbox.harness.core import Sandbox
from tests.sandbox.stepfunctions_jsonata_support import (
    finish,
    jsonata,
    output_of,
    run,
    sb,  # noqa: F401 (a fixture the tests name)
    start,
)


# --------------------------------------------------------------------------------------------------
# task tokens, timers and timestamps on the sandbox clock
# --------------------------------------------------------------------------------------------------
def _queue(sb: Sandbox) -> str:
    return str(sb.client("sqs").create_queue(QueueName=f"tokens-{uuid.uuid4().hex[:8]}")["QueueUrl"])


def _wait_for_token(sb: Sandbox, queue_url: str) -> dict[str, Any]:
    sqs = sb.client("sqs")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue_url, WaitTimeSeconds=0).get("Messages", [])
        if messages:
            return dict(json.loads(messages[0]["Body"]))
        time.sleep(0.02)
    raise AssertionError("no task token sent")


def _token_task(queue_url: str, **fields: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
        "Arguments": {
            "QueueUrl": queue_url,
            "MessageBody": {
                "token": "{% $states.context.Task.Token %}",
                "cluster": "{% $states.input.cluster %}",
            },
        },
        **fields,
    }


def test_wait_for_task_token_with_jsonata_arguments_and_output(sb: Sandbox) -> None:
    queue_url = _queue(sb)
    definition = jsonata(
        {
            "Wait For Cluster": {
                **_token_task(queue_url),
                "Output": {"status": "{% $states.result.ClusterStatus %}"},
                "End": True,
            }
        }
    )
    arn = start(sb, definition, {"cluster": "ml-1"})
    message = _wait_for_token(sb, queue_url)
    assert message["cluster"] == "ml-1"
    sb.client("stepfunctions").send_task_success(
        taskToken=message["token"], output=json.dumps({"ClusterStatus": "InService"})
    )
    result = finish(sb, arn)
    assert (result.status, result.output) == ("SUCCEEDED", {"status": "InService"})


@pytest.mark.parametrize(
    ("timers", "limit"),
    [
        ({"TimeoutSeconds": 3600}, 3600),
        ({"TimeoutSeconds": "{% $states.input.timeout %}"}, 7200),
        ({"TimeoutSeconds": 36000, "HeartbeatSeconds": 600}, 600),
    ],
    ids=["timeout", "jsonata-timeout", "heartbeat"],
)
def test_task_token_timeouts_run_on_the_sandbox_clock(
    sb: Sandbox, timers: dict[str, Any], limit: int
) -> None:
    queue_url = _queue(sb)
    definition = jsonata(
        {
            "Wait For Cluster": {
                **_token_task(queue_url),
                **timers,
                "Catch": [
                    {
                        "ErrorEquals": ["States.Timeout"],
                        "Output": {"error": "{% $states.errorOutput.Error %}"},
                        "Next": "Timed Out",
                    }
                ],
                "End": True,
            },
            "Timed Out": {"Type": "Pass", "End": True},
        }
    )
    arn = start(sb, definition, {"cluster": "ml-1", "timeout": 7200})
    _wait_for_token(sb, queue_url)
    # hours of simulated time in well under a minute of wall time; nobody answers the token
    result = finish(sb, arn, advance=300)
    assert (result.status, result.output) == ("SUCCEEDED", {"error": "States.Timeout"})
    waited = result.entered("Timed Out") - result.entered("Wait For Cluster")
    assert waited >= timedelta(seconds=limit)


def test_waits_run_on_the_sandbox_clock(sb: Sandbox) -> None:
    definition = {
        "StartAt": "Seconds",
        "States": {
            "Seconds": {
                "Type": "Wait",
                "QueryLanguage": "JSONata",
                "Seconds": "{% $states.input.seconds %}",
                "Next": "Seconds Path",
            },
            "Seconds Path": {"Type": "Wait", "SecondsPath": "$.seconds", "Next": "Until"},
            "Until": {
                "Type": "Wait",
                "QueryLanguage": "JSONata",
                "Timestamp": "{% $fromMillis($toMillis($states.context.State.EnteredTime) + 1800000) %}",
                "Next": "Timestamp Path",
            },
            "Timestamp Path": {"Type": "Wait", "TimestampPath": "$.until", "Next": "Done"},
            "Done": {"Type": "Pass", "End": True},
        },
    }
    until = sb.clock.now() + timedelta(hours=4)  # later than the three waits and overshoot
    execution_input = {"seconds": 1800, "until": until.strftime("%Y-%m-%dT%H:%M:%SZ")}
    result = run(sb, definition, execution_input, advance=300)  # three 30-minute waits, then until
    assert result.status == "SUCCEEDED", result.cause
    for state, following in (
        ("Seconds", "Seconds Path"),
        ("Seconds Path", "Until"),
        ("Until", "Timestamp Path"),
    ):
        assert result.entered(following) - result.entered(state) >= timedelta(seconds=1800), state
    assert result.entered("Done") >= until


def test_retry_delays_run_on_the_sandbox_clock(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Find Queue": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:getQueueUrl",
                "Arguments": {"QueueName": "absent"},
                "Retry": [
                    {
                        "ErrorEquals": ["States.ALL"],
                        "IntervalSeconds": 600,
                        "BackoffRate": 2,
                        "MaxAttempts": 2,
                    }
                ],
                "End": True,
            }
        }
    )
    result = run(sb, definition, advance=300)
    assert result.status == "FAILED"
    scheduled = [event["timestamp"] for event in result.history() if event["type"] == "TaskScheduled"]
    assert len(scheduled) == 3
    assert scheduled[1] - scheduled[0] >= timedelta(seconds=600)
    assert scheduled[2] - scheduled[1] >= timedelta(seconds=1200)


def test_timestamps_the_asl_sees_come_from_the_sandbox_clock(sb: Sandbox) -> None:
    before = sb.clock.now()
    out = output_of(
        sb,
        {
            "now": "{% $now() %}",
            "millis": "{% $millis() %}",
            "started": "{% $states.context.Execution.StartTime %}",
            "entered": "{% $states.context.State.EnteredTime %}",
        },
    )
    after = sb.clock.now()
    assert before.year == 2030  # years away from wall time: only the sandbox clock can produce these
    for key in ("now", "started", "entered"):
        assert before <= datetime.fromisoformat(out[key]) <= after, key
    assert before.timestamp() * 1000 <= out["millis"] <= after.timestamp() * 1000
    for key in ("now", "started", "entered"):  # as Step Functions writes them: UTC, milliseconds, "Z"
        assert re.fullmatch(AWS_TIME, out[key]), (key, out[key])


# How Step Functions writes a context object time ("Accessing the context object": 2019-03-26T20:14:13.192Z)
AWS_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_jsonpath_reads_the_context_times_as_aws_writes_them(sb: Sandbox) -> None:
    sb.clock.advance(0.1234)  # a fraction of a second: milliseconds, not moto's microseconds
    definition = {
        "StartAt": "P",
        "States": {
            "P": {
                "Type": "Pass",
                "Parameters": {"started.$": "$$.Execution.StartTime", "entered.$": "$$.State.EnteredTime"},
                "End": True,
            }
        },
    }
    result = run(sb, definition)
    assert result.status == "SUCCEEDED", result.cause  # moto's StartTime was a datetime: no output
    expected = sb.clock.now().astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert result.output == {"started": expected, "entered": expected}
    assert re.fullmatch(AWS_TIME, expected)
