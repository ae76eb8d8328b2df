"""JSONata and workflow variables in the sandbox's Step Functions, as AWS documents them.

AWS sources: "Transforming data with JSONata in Step Functions" and "Passing data between states
with variables" (Step Functions developer guide). Where AWS does not say, a real execution's error
is quoted (see docs/sandbox.md, Step Functions).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonata as jsonata_python  # type: ignore[import-untyped]
import pytest

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions.jsonata import _plain, make_evaluator, split_declarations
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


# --------------------------------------------------------------------------------------------------
# fields, $states, variables
# --------------------------------------------------------------------------------------------------
def test_arguments_output_assign_and_variables_across_states(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Remember": {
                "Type": "Pass",
                "Assign": {
                    "cluster": "{% $states.input.cluster %}",
                    "quoted": "{% 'say \"hi\"\\\\ ' & $states.input.cluster %}",
                    "count": 2,
                },
                "Output": {"kept": "{% $states.input.cluster %}"},
                "Next": "Use",
            },
            "Use": {
                "Type": "Pass",
                "Output": {
                    "cluster": "{% $cluster %}",
                    "quoted": "{% $quoted %}",
                    "next": "{% $count + 1 %}",
                    "input": "{% $states.input %}",
                    "literal": "$cluster",
                    "nested": ["{% $uppercase($cluster) %}", {"deep": "{% $count * 2 %}"}],
                },
                "End": True,
            },
        }
    )
    result = run(sb, definition, {"cluster": "ml-1"})
    assert result.status == "SUCCEEDED", result.cause
    assert result.output == {
        "cluster": "ml-1",
        "quoted": 'say "hi"\\ ml-1',  # a string with quotes and backslashes survives a variable
        "next": 3,
        "input": {"kept": "ml-1"},
        "literal": "$cluster",  # no {% %}: a literal, never evaluated
        "nested": ["ML-1", {"deep": 4}],
    }


def test_query_language_per_state_and_jsonpath_assign_with_variables(sb: Sandbox) -> None:
    definition = {
        "StartAt": "Assign In JSONPath",
        "States": {
            "Assign In JSONPath": {
                "Type": "Pass",
                "Assign": {"name.$": "$.name", "fixed": 7},
                "Next": "Read In JSONPath",
            },
            "Read In JSONPath": {
                "Type": "Pass",
                "Parameters": {"name.$": "$name", "fixed.$": "$fixed", "plain": "$name"},
                "Next": "Read In JSONata",
            },
            "Read In JSONata": {
                "Type": "Pass",
                "QueryLanguage": "JSONata",
                "Output": "{% $merge([$states.input, {'both': $name & '/' & $string($fixed)}]) %}",
                "End": True,
            },
        },
    }
    result = run(sb, definition, {"name": 'a "quoted" name'})
    assert result.status == "SUCCEEDED", result.cause
    assert result.output == {
        "name": 'a "quoted" name',
        "fixed": 7,
        "plain": "$name",
        "both": 'a "quoted" name/7',
    }


def test_functions_the_workflows_use(sb: Sandbox) -> None:
    document = {
        "cluster": {"ClusterName": "ml-1", "Status": "InService", "Tags": {"project": "llm", "owner": "ana"}},
        "nodes": [{"id": "i-1", "ok": True}, {"id": "i-2", "ok": False}, {"id": "i-3", "ok": False}],
        "arn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123def456",
        "count": "42",
    }
    expressions = {
        "exists": "{% [$exists($states.input.cluster), $exists($states.input.absent)] %}",
        "merge": "{% $merge([$states.input.cluster.Tags, {'owner': 'bo'}]) %}",
        "count": "{% $count($states.input.nodes) %}",
        "string": "{% $string($states.input.cluster.Tags) %}",
        "number": "{% $number($states.input.count) + 1 %}",
        "lookup": "{% $lookup($states.input.cluster.Tags, 'project') %}",
        "keys": "{% $keys($states.input.cluster.Tags) %}",
        "sift": "{% $sift($states.input.cluster, function($v, $k) {$k != 'Tags'}) %}",
        "filter": "{% $filter($states.input.nodes, function($n) {$not($n.ok)}).id %}",
        "map": "{% $map($states.input.nodes, function($n, $i) {$n.id & '#' & $string($i)}) %}",
        "append": "{% $append([1, 2], 3) %}",
        "before": "{% $substringBefore($states.input.arn, ':cluster/') %}",
        "after": "{% $substringAfter($states.input.arn, 'cluster/') %}",
        "contains": "{% $contains($states.input.arn, ':sagemaker:') %}",
        "join": "{% $join(['a', 'b', 'c'], '-') %}",
        "split": "{% $split('a,b,c', ',') %}",
        "case": "{% $lowercase('AbC') & $uppercase('dEf') %}",
        "millis": "{% $toMillis('2030-01-01T00:00:01.500Z') %}",
        "fromMillis": "{% $fromMillis(1893456000000) %}",
        "dropped": "{% {'kept': 1, 'dropped': $states.input.absent} %}",
        "division": "{% 10 / 4 %}",
        "whole": "{% 10 / 5 %}",
    }
    assert output_of(sb, expressions, document) == {
        "exists": [True, False],
        "merge": {"project": "llm", "owner": "bo"},
        "count": 3,
        "string": '{"project":"llm","owner":"ana"}',
        "number": 43,
        "lookup": "llm",
        "keys": ["project", "owner"],
        "sift": {"ClusterName": "ml-1", "Status": "InService"},
        "filter": ["i-2", "i-3"],
        "map": ["i-1#0", "i-2#1", "i-3#2"],
        "append": [1, 2, 3],
        "before": "arn:aws:sagemaker:us-east-1:123456789012",
        "after": "abc123def456",
        "contains": True,
        "join": "a-b-c",
        "split": ["a", "b", "c"],
        "case": "abcDEF",
        "millis": 1893456001500,
        "fromMillis": "2030-01-01T00:00:00.000Z",
        "dropped": {"kept": 1},  # JSONata drops a constructed field whose value is undefined
        "division": 2.5,
        "whole": 2,  # JSONata numbers are doubles; Step Functions writes 2, not 2.0
    }


def test_step_functions_own_functions(sb: Sandbox) -> None:
    out = output_of(
        sb,
        {
            "partition": "{% $partition([1, 2, 3, 4, 5, 6, 7], 3) %}",
            "range": "{% $range(0, 10, 2) %}",
            "down": "{% $range(5, 1, -2) %}",
            "sha256": "{% $hash('hyperpod', 'SHA-256') %}",
            "md5": "{% $hash('hyperpod', 'MD5') %}",
            "seeded": "{% [$random(7), $random(7)] %}",
            "random": "{% $random() %}",
            "uuid": "{% $uuid() %}",
            "parsed": "{% $parse($states.input.text) %}",
        },
        {"text": '{"a": [1, {"b": null}], "c": "d"}'},
    )
    assert out["partition"] == [[1, 2, 3], [4, 5, 6], [7]]
    assert out["range"] == [0, 2, 4, 6, 8, 10]
    assert out["down"] == [5, 3, 1]
    assert out["sha256"] == hashlib.sha256(b"hyperpod").hexdigest()
    assert out["md5"] == hashlib.md5(b"hyperpod").hexdigest()
    first, second = out["seeded"]
    assert first == second
    assert 0 <= first < 1
    assert 0 <= out["random"] < 1
    assert uuid.UUID(out["uuid"]).version == 4
    assert out["parsed"] == {"a": [1, {"b": None}], "c": "d"}


@pytest.mark.parametrize(
    ("output", "cause"),
    [
        # AWS (a real execution's cause): "The JSONata expression '$states.input.pushLocation'
        # specified for the field 'Arguments/Input/pushLocation' returned nothing (undefined)."
        ({"field": "{% $states.input.absent %}"}, "'$states.input.absent' returned nothing (undefined)"),
        ("{% $states.input.absent %}", "'$states.input.absent' returned nothing (undefined)"),
        ({"n": "{% $number('not a number') %}"}, "threw an error"),
        ("{% $eval('1 + 1') %}", "$eval is not available"),
        ("{% $hash('x', 'SHA-999') %}", "unsupported algorithm"),
    ],
)
def test_failing_expression_fails_the_state_with_query_evaluation_error(
    sb: Sandbox, output: Any, cause: str
) -> None:
    result = run(sb, jsonata({"P": {"Type": "Pass", "Output": output, "End": True}}))
    assert (result.status, result.error) == ("FAILED", "States.QueryEvaluationError")
    assert cause in str(result.cause)
    assert str(result.cause).startswith("An error occurred while executing the state 'P'")
    assert any(event["type"] == "EvaluationFailed" for event in result.history())


# --------------------------------------------------------------------------------------------------
# Choice, Map, Parallel, Task, Catch
# --------------------------------------------------------------------------------------------------
def test_choice_conditions_and_rule_assign(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Decide": {
                "Type": "Choice",
                "Choices": [
                    {
                        "Condition": "{% $states.input.status = 'Failed' %}",
                        "Assign": {"verdict": "broken"},
                        "Next": "Done",
                    },
                    {
                        "Condition": "{% $states.input.status in ['InService', 'Updating'] %}",
                        "Assign": {"verdict": "{% 'up: ' & $states.input.status %}"},
                        "Next": "Done",
                    },
                ],
                # moto applies the state's Assign whenever the next state is the Default's, even after
                # a rule matched (AWS: only when no rule matches), so Default goes elsewhere here
                "Default": "No Match",
                "Assign": {"verdict": "unknown"},
            },
            "No Match": {"Type": "Pass", "Next": "Done"},
            "Done": {"Type": "Pass", "Output": {"verdict": "{% $verdict %}"}, "End": True},
        }
    )
    verdicts = [
        run(sb, definition, {"status": status}).output for status in ("Failed", "InService", "Deleting")
    ]
    assert verdicts == [{"verdict": "broken"}, {"verdict": "up: InService"}, {"verdict": "unknown"}]


LABEL = "{% $join([$prefix, '-', $string($states.input.index), ':', $states.input.id]) %}"


def test_map_items_item_selector_and_variable_scope(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Prepare": {"Type": "Pass", "Assign": {"prefix": "node"}, "Next": "Each Node"},
            "Each Node": {
                "Type": "Map",
                "Items": "{% $states.input.ids %}",
                "ItemSelector": {
                    "id": "{% $states.context.Map.Item.Value %}",
                    "index": "{% $states.context.Map.Item.Index %}",
                },
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Label",
                    "States": {
                        "Label": {
                            "Type": "Pass",
                            "Assign": {"inner": "{% $states.input.id %}"},
                            "Output": LABEL,
                            "End": True,
                        }
                    },
                },
                "Output": {"labels": "{% $states.result %}", "outerStillThere": "{% $prefix %}"},
                "Next": "After",
            },
            "After": {
                "Type": "Pass",
                # a variable assigned inside an iteration is not visible outside the Map
                "Output": "{% $merge([$states.input, {'innerVisible': $exists($inner)}]) %}",
                "End": True,
            },
        }
    )
    result = run(sb, definition, {"ids": ["i-1", "i-2"]})
    assert result.status == "SUCCEEDED", result.cause
    assert result.output == {
        "labels": ["node-0:i-1", "node-1:i-2"],
        "outerStillThere": "node",
        "innerVisible": False,
    }


def test_parallel_branches_read_outer_variables(sb: Sandbox) -> None:
    branch = {
        "StartAt": "Read",
        "States": {
            "Read": {"Type": "Pass", "Output": "{% $greeting & ' ' & $states.input.who %}", "End": True}
        },
    }
    definition = jsonata(
        {
            "Set": {"Type": "Pass", "Assign": {"greeting": "hello"}, "Next": "Both"},
            "Both": {
                "Type": "Parallel",
                "Arguments": {"who": "{% $states.input.who %}"},
                "Branches": [branch, branch],
                "Output": "{% $states.result %}",
                "End": True,
            },
        }
    )
    assert run(sb, definition, {"who": "ana"}).output == ["hello ana", "hello ana"]


def test_lambda_invoke_and_aws_sdk_tasks(sb: Sandbox) -> None:
    function_name = sb.stack.functions["EchoFunction"].name
    definition = jsonata(
        {
            "Make Queue": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:createQueue",
                "Arguments": {"QueueName": "{% 'jsonata-' & $states.input.name %}"},
                "Assign": {"queueUrl": "{% $states.result.QueueUrl %}"},
                "Output": "{% $states.input %}",
                "Next": "Echo",
            },
            "Echo": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Arguments": {"FunctionName": function_name, "Payload": {"queue": "{% $queueUrl %}"}},
                "Output": {
                    "echoed": "{% $states.result.Payload.event.queue %}",
                    "status": "{% $states.result.StatusCode %}",
                },
                "End": True,
            },
        }
    )
    result = run(sb, definition, {"name": "q1"})
    assert result.status == "SUCCEEDED", result.cause
    assert result.output["echoed"].endswith("/jsonata-q1")
    assert result.output["status"] == 200


def test_catch_output_and_assign_read_the_error_output(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Find Queue": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:getQueueUrl",
                "Arguments": {"QueueName": "{% $states.input.queue %}"},
                "Catch": [
                    {
                        "ErrorEquals": ["States.ALL"],
                        "Assign": {
                            "failedWith": "{% $states.errorOutput.Error %}",
                            "cause": "{% $states.errorOutput.Cause %}",
                        },
                        "Output": {
                            "input": "{% $states.input %}",
                            "error": "{% $states.errorOutput.Error %}",
                        },
                        "Next": "Record",
                    }
                ],
                "End": True,
            },
            "Record": {
                "Type": "Pass",
                "Output": {
                    "caught": "{% $states.input %}",
                    "failedWith": "{% $failedWith %}",
                    "cause": "{% $cause %}",
                },
                "End": True,
            },
        }
    )
    result = run(sb, definition, {"queue": "absent"})
    assert result.status == "SUCCEEDED", result.cause
    error = result.output["failedWith"]
    assert error
    assert result.output["caught"] == {"input": {"queue": "absent"}, "error": error}
    assert result.output["cause"]  # the cause string (quotes and all) went through a variable


def test_catch_of_query_evaluation_error(sb: Sandbox) -> None:
    definition = jsonata(
        {
            "Bad": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sqs:listQueues",
                "Arguments": {"QueueNamePrefix": "{% $states.input.absent %}"},
                "Catch": [
                    {
                        "ErrorEquals": ["States.QueryEvaluationError"],
                        "Output": "{% $states.errorOutput %}",
                        "Next": "Caught",
                    }
                ],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        }
    )
    result = run(sb, definition)
    assert result.status == "SUCCEEDED", result.cause
    assert result.output["Error"] == "States.QueryEvaluationError"
    assert "returned nothing (undefined)" in result.output["Cause"]


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


# Declarations moto writes before every expression: $states (input with nulls, nesting, escapes, big
# and fractional numbers) and workflow variables; then expressions that read them, define their own
# and are checked the way moto checks a result ($exists / $type around the block).
_DECLARED = (
    '$states:={"input":{"a":null,"b":[1,null,{"c":"x;\\"y\\"\\n"}],"n":12345678901234567890,'
    '"f":2.5,"e":1e3,"t":true},"context":{"Execution":{"Id":"arn"}}};$v:="q";$w:=null;$z:=[];'
)
_BODIES = (
    "$states.input.a",
    "$exists($states.input.a) and $exists($w)",
    "$states.input.b[2].c & $v",
    "$states.input.n + $states.input.f",
    "$states.input.e / 10",
    "$count($z) = 0 ? 'empty' : 'no'",
    "$type($states.input.b[1])",
    "$nothing",
    "$x:=1;$x+1",
    "$x:=[1,2][0];$x",
    "$states.input.b[$type($)='number']",
    "{'k': $states.context.Execution.Id, 'w': $w}",
    "$states.input.t ? 1 : 2",
    "[0..$states.input.b[0]]",
    "$string($states.input)",
    "$string($states.input.b) & $states.input.f",
    "$substring(?, 0, 1)($v)",
)


@pytest.mark.parametrize("body", _BODIES)
@pytest.mark.parametrize("wrapper", ["({})", "$exists(({}))", "$type(({}))"])
def test_declarations_taken_as_bindings_evaluate_as_their_text(body: str, wrapper: str) -> None:
    """The evaluator binds the leading JSON declarations instead of parsing them as text (a parse
    per evaluation); the result must be the one jsonata-python gives for the whole text."""
    expression = wrapper.format(_DECLARED + body)
    text, bindings = split_declarations(expression)
    assert set(bindings) == {"states", "v", "w", "z"} | ({"x"} if body == "$x:=1;$x+1" else set())
    assert text == wrapper.format(body.removeprefix("$x:=1;"))
    evaluate = make_evaluator(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    expected = jsonata_python.Jsonata(expression).evaluate(None)
    assert evaluate(expression) == _plain(expected)
    assert type(evaluate(expression)) is type(_plain(expected))
