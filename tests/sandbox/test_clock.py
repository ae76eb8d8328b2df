"""The sandbox clock: fast while the control plane waits, real speed while it works, so a starved
process does not burn simulated time (wall time is a fake here: every figure is exact)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.lambda_runtime import LambdaRuntime
from sandbox.harness.core import Sandbox

ROLE = "arn:aws:iam::123456789012:role/r"
TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


class FakeWall:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def wall() -> FakeWall:
    return FakeWall()


def test_idle_time_runs_at_speed_and_work_at_real_speed(wall: FakeWall) -> None:
    clock = SandboxClock(speed=1200, wall=wall)
    wall.now += 1
    assert clock.elapsed() == 1200
    with clock.working():
        wall.now += 6  # six starved wall seconds of an aws-sdk task: six simulated seconds, not two hours
        assert clock.elapsed() == 1206
    wall.now += 1
    assert clock.elapsed() == 2406
    clock.advance(60)
    assert clock.elapsed() == 2466


def test_work_on_any_thread_holds_the_clock_back_until_all_of_it_ends(wall: FakeWall) -> None:
    clock = SandboxClock(speed=600, wall=wall)
    ended = threading.Event()
    started = threading.Event()

    def other() -> None:
        with clock.working():
            started.set()
            ended.wait()

    thread = threading.Thread(target=other)
    thread.start()
    started.wait()
    with clock.working():
        wall.now += 2
    assert clock.working_now == 1
    wall.now += 3
    ended.set()
    thread.join()
    wall.now += 1
    assert clock.elapsed() == 2 + 3 + 600
    assert clock.working_now == 0


def test_a_source_counts_its_own_work(wall: FakeWall) -> None:
    clock = SandboxClock(speed=600, wall=wall)
    clock.set_work("stepfunctions", 2)  # two executions between waits
    wall.now += 1
    clock.set_work("stepfunctions", 0)  # both wait
    wall.now += 1
    clock.set_work("stepfunctions", -1)  # more waits than evaluations (Parallel branches): no work
    wall.now += 1
    assert clock.elapsed() == 1 + 600 + 600


def test_a_frozen_clock_stays_frozen_while_working(wall: FakeWall) -> None:
    clock = SandboxClock(speed=0, wall=wall)
    with clock.working():
        wall.now += 10
    assert clock.elapsed() == 0


# ---------------------------------------------------------------- the work the sandbox marks (wall time)
def _run(sfn: Any, clock: SandboxClock, definition: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Run ``definition`` to its end on ``clock``: when each state was entered, and the wall seconds."""
    with seams.installed(
        seams.evaluate_stepfunctions_jsonata, seams.run_stepfunctions_on_sandbox_clock, clock=clock
    ):
        machine = sfn.create_state_machine(name="m", definition=json.dumps(definition), roleArn=ROLE)
        started = time.monotonic()
        arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"])["executionArn"]
        while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            assert time.monotonic() - started < 60, "still RUNNING"
            time.sleep(0.01)
        wall = time.monotonic() - started
        events = sfn.get_execution_history(executionArn=arn, maxResults=100)["events"]
    assert described["status"] == "SUCCEEDED"
    assert clock.working_now == 0
    entered = {
        e["stateEnteredEventDetails"]["name"]: e["timestamp"]
        for e in events
        if "stateEnteredEventDetails" in e
    }
    return entered, wall


def test_an_execution_between_two_waits_is_work_and_its_wait_is_not(sfn: Any) -> None:
    """A state that keeps its thread busy takes simulated time at real speed; its Wait at full speed."""
    entered, wall = _run(
        sfn,
        SandboxClock(speed=1000),
        {
            "QueryLanguage": "JSONata",
            "StartAt": "Busy",
            "States": {
                # a few hundred wall milliseconds of JSONata on the execution's thread
                "Busy": {
                    "Type": "Pass",
                    "Output": "{% $count($map([1..100000], function($v) { $string($v) })) %}",
                    "Next": "Wait",
                },
                "Wait": {"Type": "Wait", "Seconds": 600, "Next": "Done"},
                "Done": {"Type": "Pass", "End": True},
            },
        },
    )
    # without the mark, Busy alone took wall x 1000: minutes of simulated time for a fraction of a second
    assert (entered["Wait"] - entered["Busy"]).total_seconds() <= wall + 1
    # the wait (600 s) passed at x1000, in well under its 600 wall seconds
    assert (entered["Done"] - entered["Wait"]).total_seconds() >= 600
    assert wall < 60


def test_a_parallel_whose_branches_wait_is_not_work(sfn: Any) -> None:
    wait = {"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 600, "End": True}}}
    entered, wall = _run(
        sfn,
        SandboxClock(speed=1000),
        {
            "StartAt": "Both",
            "States": {
                "Both": {"Type": "Parallel", "Branches": [wait, wait], "Next": "Done"},
                "Done": {"Type": "Pass", "End": True},
            },
        },
    )
    assert (entered["Done"] - entered["Both"]).total_seconds() >= 600
    assert wall < 30  # the parent waiting for its branches counted as work: 600 wall seconds


def test_a_call_aws_is_slow_to_answer_is_not_work() -> None:
    """clock.sleep (a simulated latency fault) from inside work lets simulated time pass at speed."""
    clock = SandboxClock(speed=1000)
    with clock.working():
        before, started = clock.elapsed(), time.monotonic()
        clock.sleep(60)
        taken, wall = clock.elapsed() - before, time.monotonic() - started
    assert taken >= 60
    assert wall < 10  # counted as work, 60 simulated seconds took 60 wall seconds


def test_a_function_that_runs_long_takes_simulated_time_at_real_speed() -> None:
    clock = SandboxClock(speed=1000)
    runtime = LambdaRuntime(working=clock.working)
    with Sandbox(TEMPLATE, simulators=False, background=False, clock=clock, seed=3) as sb:
        runtime.register(sb.stack.function("EchoFunction"))
        before = clock.elapsed()
        result = runtime.invoke("EchoFunction", {"sleep": 0.5})
        taken = clock.elapsed() - before
    assert result.ok
    # 0.5 s of work at x1, and the moments outside it at x1000; without the mark: 500 simulated seconds
    assert 0.5 <= taken < 100
