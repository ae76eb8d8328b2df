"""JSONata fields, $states and workflow variables in the sandbox's Step Functions, as AWS documents them."""

# ruff: noqa: F811  (the tests name fixtures imported from stepfunctions_jsonata_support.py)
from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

import jsonata as jsonata_python  # type: ignore[import-untyped]
import pytest

from sandbox.emulator.stepfunctions.jsonata import _plain, make_evaluator, split_declarations
from sandbox.harness.core import Sandbox
from tests.sandbox.stepfunctions_jsonata_support import (
    jsonata,
    output_of,
    run,
    sb,  # noqa: F401 (a fixture the tests name)
)


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
