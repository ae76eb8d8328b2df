"""The parse-tree cache seam: executions of one definition parse it once, still get their own
evaluation components (Map, Parallel, Retry counters, Catch behave as without the cache, also run
concurrently), and an updated definition is parsed anew."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import parse_cache as stepfunctions_parse_cache

ROLE = "arn:aws:iam::123456789012:role/r"


@pytest.fixture(autouse=True)
def _no_cached_trees() -> None:
    """The process keeps trees across installs: each test counts its own parses from an empty cache."""
    stepfunctions_parse_cache.clear()


ATTEMPTS = 2  # retries after the first failure: the branch's Fail state is entered 1 + ATTEMPTS times

# A Map, then a Parallel whose failing branch is retried ATTEMPTS times (its counter lives in each
# execution's heap under the retrier's key) and then caught.
DEFINITION: dict[str, Any] = {
    "StartAt": "Double",
    "States": {
        "Double": {
            "Type": "Map",
            "ItemsPath": "$.items",
            "ItemSelector": {"n.$": "$$.Map.Item.Value", "index.$": "$$.Map.Item.Index"},
            "ItemProcessor": {
                "ProcessorConfig": {"Mode": "INLINE"},
                "StartAt": "Keep",
                "States": {"Keep": {"Type": "Pass", "End": True}},
            },
            "ResultPath": "$.doubled",
            "Next": "Both",
        },
        "Both": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "Boom", "States": {"Boom": {"Type": "Fail", "Error": "Boom", "Cause": "always"}}},
            ],
            "Retry": [
                {"ErrorEquals": ["Boom"], "IntervalSeconds": 1, "MaxAttempts": ATTEMPTS, "BackoffRate": 1}
            ],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.caught", "Next": "Done"}],
            "ResultPath": "$.both",
            "Next": "Done",
        },
        "Done": {"Type": "Pass", "End": True},
    },
}


def _finish(sfn: Any, executions: list[str]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 60
    finished: list[dict[str, Any]] = []
    for arn in executions:
        while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"{arn} still RUNNING"
            time.sleep(0.01)
        finished.append(dict(described))
    return finished


def _run_concurrently(sfn: Any, machine: str, count: int) -> list[tuple[str, Any, Counter[str]]]:
    """``count`` executions started together: each one's status, output and history event types."""
    executions = [
        sfn.start_execution(
            stateMachineArn=machine, name=f"run-{i}", input=json.dumps({"items": [i, i + 1, i + 2]})
        )["executionArn"]
        for i in range(count)
    ]
    results = []
    for described in _finish(sfn, executions):
        history = sfn.get_execution_history(executionArn=described["executionArn"], maxResults=1000)["events"]
        results.append(
            (described["status"], json.loads(described["output"]), Counter(e["type"] for e in history))
        )
    return results


def _scenario(sfn: Any, name: str) -> list[tuple[str, Any, Counter[str]]]:
    machine = sfn.create_state_machine(name=name, definition=json.dumps(DEFINITION), roleArn=ROLE)[
        "stateMachineArn"
    ]
    return _run_concurrently(sfn, machine, count=6)


def test_concurrent_executions_match_the_uncached_ones_and_parse_once(sfn: Any) -> None:
    clock = SandboxClock(speed=10_000)  # Retry intervals pass in wall milliseconds
    with seams.installed(seams.run_stepfunctions_on_sandbox_clock, clock=clock):
        uncached = _scenario(sfn, "uncached")
    with seams.installed(
        seams.run_stepfunctions_on_sandbox_clock, seams.cache_stepfunctions_parse_trees, clock=clock
    ):
        cached = _scenario(sfn, "cached")
        stats = stepfunctions_parse_cache.stats()

    assert cached == uncached
    for i, (status, output, events) in enumerate(cached):
        assert status == "SUCCEEDED"
        assert output["doubled"] == [{"n": n, "index": k} for k, n in enumerate([i, i + 1, i + 2])]
        assert output["caught"]["Error"] == "Boom"
        assert events["FailStateEntered"] == 1 + ATTEMPTS  # each execution counted its own retries
        assert events["MapIterationSucceeded"] == 3
    # CreateStateMachine's validation parsed it; all six StartExecutions were served from the cache
    assert (stats.misses, stats.hits) == (1, 6)


def test_an_updated_definition_is_parsed_anew(sfn: Any) -> None:
    def answer(value: str) -> str:
        return json.dumps(
            {"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": {"v": value}, "End": True}}}
        )

    with seams.installed(seams.cache_stepfunctions_parse_trees):
        machine = sfn.create_state_machine(name="m", definition=answer("first"), roleArn=ROLE)[
            "stateMachineArn"
        ]
        [before] = _finish(
            sfn, [sfn.start_execution(stateMachineArn=machine, name="before", input="{}")["executionArn"]]
        )
        sfn.update_state_machine(stateMachineArn=machine, definition=answer("second"))
        [after] = _finish(
            sfn, [sfn.start_execution(stateMachineArn=machine, name="after", input="{}")["executionArn"]]
        )
        stats = stepfunctions_parse_cache.stats()

    assert (json.loads(before["output"]), json.loads(after["output"])) == ({"v": "first"}, {"v": "second"})
    assert (stats.misses, stats.hits) == (2, 2)


def test_every_parse_builds_fresh_components_from_one_tree() -> None:
    definition = json.dumps(DEFINITION)
    with seams.installed(seams.cache_stepfunctions_parse_trees):
        first_program, first_tree = AmazonStateLanguageParser.parse(definition)
        second_program, second_tree = AmazonStateLanguageParser.parse(definition)
    assert second_tree is first_tree
    assert second_program is not first_program


def test_a_syntax_error_is_moto_s_and_is_not_cached(sfn: Any) -> None:
    with seams.installed(seams.cache_stepfunctions_parse_trees):
        for _ in range(2):
            with pytest.raises(ClientError, match="ASLParserException"):
                sfn.create_state_machine(name="bad", definition='{"StartAt": "A", "States": {', roleArn=ROLE)
        stats = stepfunctions_parse_cache.stats()
    assert (stats.misses, stats.hits) == (0, 0)


def test_installed_then_restored_counters_zeroed_trees_kept() -> None:
    original = vars(AmazonStateLanguageParser)["parse"]
    with seams.installed(seams.cache_stepfunctions_parse_trees):
        assert vars(AmazonStateLanguageParser)["parse"] is not original
        _, tree = AmazonStateLanguageParser.parse(json.dumps(DEFINITION))
        assert stepfunctions_parse_cache.stats().misses == 1
    assert vars(AmazonStateLanguageParser)["parse"] is original
    assert stepfunctions_parse_cache.stats() == stepfunctions_parse_cache.ParseStats()
    # a later install (the next deploy of the same template) is served the tree parsed before
    with seams.installed(seams.cache_stepfunctions_parse_trees):
        _, again = AmazonStateLanguageParser.parse(json.dumps(DEFINITION))
        assert stepfunctions_parse_cache.stats().hits == 1
    assert again is tree


def test_drift_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        AmazonStateLanguageParser, "parse", lambda definition: None
    )  # no longer a staticmethod
    with (
        pytest.raises(seams.SeamDrift, match="cache_stepfunctions_parse_trees"),
        seams.installed(seams.cache_stepfunctions_parse_trees),
    ):
        pass
