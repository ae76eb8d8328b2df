"""The Step Functions seams (JSONata evaluator, timers on the sandbox clock): installed and removed
cleanly, and refused with SeamDrift when a moto upgrade moves what they replace (moto is pinned)."""

from __future__ import annotations

import json
import threading
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.stepfunctions.parser import models as parser_models
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.common.string.string_expression import StringJSONata
from moto.stepfunctions.parser.asl.component.intrinsic import jsonata as intrinsic_declarations
from moto.stepfunctions.parser.asl.component.state import state as state_module
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import timestamp as wait_timestamp
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
from moto.stepfunctions.parser.asl.eval import states, variable_store
from moto.stepfunctions.parser.asl.eval.callback import callback
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event import event_manager
from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata
from moto.stepfunctions.parser.backend import execution as backend_execution
from moto.stepfunctions.parser.backend import execution_worker

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import limits as stepfunctions_limits

JSONATA_PATCHED: list[tuple[Any, str]] = [
    (moto_jsonata, "_eval_jsonata"),
    (moto_jsonata, "encode_jsonata_variable_declarations"),
    (states, "encode_jsonata_variable_declarations"),
    (variable_store, "encode_jsonata_variable_declarations"),
    (intrinsic_declarations, "_DECLARATION_BY_VARIABLE_REFERENCE"),
    (StringJSONata, "_eval_body"),
]
CLOCK_PATCHED: list[tuple[Any, str]] = [
    (WaitFunction, "_wait_interval"),
    (retrier_decl, "time"),
    (callback, "Event"),
    *[
        (module, "datetime")
        for module in (parser_models, backend_execution, event_manager, state_module, wait_timestamp)
    ],
    (state_module, "StateData"),
    (execution_worker, "ExecutionData"),
]


def _values(patched: list[tuple[Any, str]]) -> list[Any]:
    return [vars(owner).get(name) for owner, name in patched]


@pytest.mark.parametrize(
    ("seam", "patched"),
    [
        (seams.evaluate_stepfunctions_jsonata, JSONATA_PATCHED),
        (seams.run_stepfunctions_on_sandbox_clock, CLOCK_PATCHED),
    ],
)
def test_installed_then_restored(seam: Callable[[], None], patched: list[tuple[Any, str]]) -> None:
    before = _values(patched)
    with seams.installed(seam, clock=SandboxClock(speed=0)):
        assert all(now is not was for now, was in zip(_values(patched), before, strict=True))
    assert _values(patched) == before


def _renamed_wait(self: Any, env: Any, seconds: Any) -> None:
    raise AssertionError("never called")


def _eval_without_hook(jsonata_expression: str) -> Any:
    raise AssertionError("never called")


MOVES: dict[str, tuple[Callable[[], None], Any, str, Any]] = {
    # name: (seam, owner, attribute, replacement; None deletes it)
    "engine hook gone": (seams.evaluate_stepfunctions_jsonata, moto_jsonata, "_eval_jsonata", None),
    "hook no longer called": (
        seams.evaluate_stepfunctions_jsonata,
        moto_jsonata,
        "eval_jsonata_expression",
        _eval_without_hook,
    ),
    "declarations moved": (
        seams.evaluate_stepfunctions_jsonata,
        variable_store,
        "encode_jsonata_variable_declarations",
        None,
    ),
    "intrinsic declarations moved": (
        seams.evaluate_stepfunctions_jsonata,
        intrinsic_declarations,
        "_DECLARATION_BY_VARIABLE_REFERENCE",
        None,
    ),
    "expression evaluation changed": (
        seams.evaluate_stepfunctions_jsonata,
        StringJSONata,
        "_eval_body",
        lambda self, environment, extra: None,
    ),
    "wait reshaped": (
        seams.run_stepfunctions_on_sandbox_clock,
        WaitFunction,
        "_wait_interval",
        _renamed_wait,
    ),
    "retry sleeps otherwise": (
        seams.run_stepfunctions_on_sandbox_clock,
        retrier_decl,
        "time",
        types.SimpleNamespace(sleep=time.sleep),
    ),
    "callbacks wait otherwise": (
        seams.run_stepfunctions_on_sandbox_clock,
        callback,
        "Event",
        threading.Condition,
    ),
    "context State built otherwise": (
        seams.run_stepfunctions_on_sandbox_clock,
        state_module,
        "StateData",
        dict,
    ),
    "context Execution built otherwise": (
        seams.run_stepfunctions_on_sandbox_clock,
        execution_worker,
        "ExecutionData",
        dict,
    ),
    "entered time read otherwise": (
        seams.run_stepfunctions_on_sandbox_clock,
        state_module,
        "datetime",
        types.SimpleNamespace(),
    ),
}


@pytest.mark.parametrize("move", list(MOVES))
def test_drift_is_detected_and_nothing_stays_installed(monkeypatch: pytest.MonkeyPatch, move: str) -> None:
    seam, owner, attribute, replacement = MOVES[move]
    if replacement is None:
        monkeypatch.delattr(owner, attribute)
    else:
        monkeypatch.setattr(owner, attribute, replacement)
    before = _values(JSONATA_PATCHED + CLOCK_PATCHED)
    with pytest.raises(seams.SeamDrift), seams.installed(seam):
        pass
    assert _values(JSONATA_PATCHED + CLOCK_PATCHED) == before


def _execute(sfn: Any, definition: dict[str, Any]) -> dict[str, Any]:
    machine = sfn.create_state_machine(
        name="m", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/r"
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]
    deadline = time.monotonic() + 20
    while (described := sfn.describe_execution(executionArn=execution))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return dict(described)


JSONATA_PASS = {
    "QueryLanguage": "JSONata",
    "StartAt": "P",
    "States": {"P": {"Type": "Pass", "Output": {"at": "{% $now() %}"}, "End": True}},
}


def test_without_the_seam_moto_cannot_evaluate_jsonata(sfn: Any) -> None:
    """What the seam exists for: if moto ever ships an evaluator, this fails and the seam can go."""
    described = _execute(sfn, JSONATA_PASS)
    assert (described["status"], described["error"]) == ("FAILED", "States.Runtime")
    assert "'NoneType' object is not callable" in described["cause"]


def test_seams_run_jsonata_on_the_given_clock_without_a_sandbox(sfn: Any) -> None:
    clock = SandboxClock(speed=0, start=datetime(2031, 5, 4, tzinfo=UTC))
    with seams.installed(
        seams.evaluate_stepfunctions_jsonata, seams.run_stepfunctions_on_sandbox_clock, clock=clock
    ):
        described = _execute(sfn, JSONATA_PASS)
    assert described["status"] == "SUCCEEDED", described.get("cause")
    assert json.loads(described["output"]) == {"at": "2031-05-04T00:00:00.000Z"}


QUOTAS_PATCHED: list[tuple[Any, str]] = [
    *[(module, "is_within_size_quota") for module in stepfunctions_limits._SIZE_CHECKERS],
    (ErrorEqualsDecl, "_eval_body"),
    (parser_models.StepFunctionsParserBackend, "start_execution"),
    (Environment, "__init__"),
    (Environment, "set_error"),
    (event_manager.EventManager, "add_event"),
]


def test_quotas_installed_then_restored() -> None:
    before = _values(QUOTAS_PATCHED)
    with seams.installed(seams.apply_stepfunctions_quotas):
        assert all(now is not was for now, was in zip(_values(QUOTAS_PATCHED), before, strict=True))
    assert _values(QUOTAS_PATCHED) == before


@pytest.mark.parametrize(
    ("owner", "attribute", "replacement"),
    [
        (state_module, "is_within_size_quota", lambda value: True),  # moto checks sizes otherwise
        (ErrorEqualsDecl, "_eval_body", lambda self, env: None),  # States.ALL matched elsewhere
        (event_manager.EventIdGenerator, "__init__", lambda self: None),  # events counted otherwise
    ],
)
def test_quotas_drift_is_detected(
    monkeypatch: pytest.MonkeyPatch, owner: Any, attribute: str, replacement: Any
) -> None:
    monkeypatch.setattr(owner, attribute, replacement)
    before = _values(QUOTAS_PATCHED)
    with pytest.raises(seams.SeamDrift), seams.installed(seams.apply_stepfunctions_quotas):
        pass
    assert _values(QUOTAS_PATCHED) == before
