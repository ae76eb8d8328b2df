"""JSONata in the sandbox's Choice, Map, Parallel, Task states and Catch, as AWS documents them."""

# ruff: noqa: F811  (the tests name fixtures imported from stepfunctions_jsonata_support.py)
from __future__ import annotations

from sandbox.harness.core import Sandbox
from tests.sandbox.stepfunctions_jsonata_support import (
    jsonata,
    run,
    sb,  # noqa: F401 (a fixture the tests name)
)


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
