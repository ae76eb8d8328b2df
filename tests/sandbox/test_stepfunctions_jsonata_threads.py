"""JSONata under thread concurrency, and executions outliving their sandbox.

Under ~100 concurrent executions the healing bench saw ``TypeError: 'NoneType' object is not
callable`` from JSONata evaluations. The evaluator itself is thread-safe (the first test hammers it
from 64 threads with a tiny switch interval); the error came from the sandbox's teardown: ``stop()``
removed the seams, so moto's JSONata hook went back to ``None``, while executions were still
running in moto's threads. The second test stops a sandbox in the middle of running executions.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata
from moto.stepfunctions.parser.backend.execution import Execution
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions.jsonata import make_evaluator
from sandbox.harness.core import Sandbox
from tests.sandbox.conftest import create_states_role

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
ROLE_NAME = "jsonata-threads"
ROLE = f"arn:aws:iam::123456789012:role/{ROLE_NAME}"
START = datetime(2030, 1, 1, tzinfo=UTC)
THREADS = 64
EVALUATIONS = 8  # per thread


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    """Switch threads every microsecond, so evaluations interleave inside jsonata-python."""
    saved = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(saved)


def _thread_now() -> datetime:
    # every thread its own clock reading: a timestamp leaking between evaluations shows
    return START + timedelta(seconds=int(threading.current_thread().name.removeprefix("jsonata-")))


def _expressions(worker: int, round_: int) -> list[tuple[str, Any]]:
    """(expression as moto composes it, the value it must give) for one thread's round."""
    states = {"input": {"worker": worker, "round": round_, "ids": [f"i-{worker}-{k}" for k in range(4)]}}
    declared = f"$states:={json.dumps(states)};$name:={json.dumps(f'w{worker}')};"
    millis = int(START.timestamp() * 1000) + worker * 1000
    return [
        (
            f"({declared}{{'w': $states.input.worker, 'r': $states.input.round, 'm': $millis(), "
            f"'n': $uppercase($name)}})",
            {"w": worker, "r": round_, "m": millis, "n": f"W{worker}"},
        ),
        (
            f"({declared}$map($states.input.ids, "
            "function($v, $i){$v & '#' & $string($i + $states.input.round)}))",
            [f"i-{worker}-{k}#{k + round_}" for k in range(4)],
        ),
        (
            f"({declared}$partition($sort($states.input.ids, function($a, $b){{$a < $b}}), 3))",
            [[f"i-{worker}-{k}" for k in (3, 2, 1)], [f"i-{worker}-0"]],
        ),
        (
            f"({declared}$sum($filter([1..($states.input.worker + 1)], function($v){{$v % 2 = 1}})))",
            sum(v for v in range(1, worker + 2) if v % 2 == 1),
        ),
        # the same text in every thread, a different value in each
        (
            "($now() & ' ' & $string($millis()))",
            f"{(START + timedelta(seconds=worker)).isoformat().replace('+00:00', '.000Z')} {millis}",
        ),
    ]


@pytest.mark.usefixtures("tiny_switch_interval")
def test_the_evaluator_gives_every_thread_its_own_result() -> None:
    evaluate = make_evaluator(_thread_now)
    go = threading.Barrier(THREADS)
    wrong: list[tuple[int, str, Any, Any]] = []

    def work(worker: int) -> None:
        go.wait()
        for round_ in range(EVALUATIONS):
            for expression, expected in _expressions(worker, round_):
                try:
                    got = evaluate(expression)
                except Exception as error:  # noqa: BLE001 - every failure is a finding
                    got = repr(error)
                if got != expected:
                    wrong.append((worker, expression, expected, got))

    threads = [threading.Thread(target=work, args=(n,), name=f"jsonata-{n}") for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not wrong, f"{len(wrong)} wrong results, e.g. {wrong[:3]}"


# --------------------------------------------------------------------------------------------------
# a sandbox stopped while executions run
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with Sandbox(
        TEMPLATE, simulators=False, background=False, clock=SandboxClock(speed=0, start=START), seed=5
    ) as sandbox:
        create_states_role(sandbox, ROLE_NAME, ["sqs:*"])
        yield sandbox


def _machine(sb: Sandbox, states: dict[str, Any]) -> str:
    definition = {"QueryLanguage": "JSONata", "StartAt": next(iter(states)), "States": states}
    return str(
        sb.client("stepfunctions").create_state_machine(
            name=f"m-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]
    )


def _entered(sb: Sandbox, arn: str, state: str) -> bool:
    history = sb.client("stepfunctions").get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return any(event.get("stateEnteredEventDetails", {}).get("name") == state for event in history)


def _wait(condition: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.02)


@pytest.mark.slow  # a whole sandbox, stopped under running executions
def test_stopping_the_sandbox_ends_its_executions_before_their_jsonata_goes(sb: Sandbox) -> None:
    sfn = sb.client("stepfunctions")
    # a repair waiting for its slot: JSONata between 60-second waits on the sandbox clock
    polling = _machine(
        sb,
        {
            "Count": {"Type": "Pass", "Assign": {"n": "{% $states.input.n + 1 %}"}, "Next": "Nap"},
            "Nap": {"Type": "Wait", "Seconds": 60, "Output": {"n": "{% $n %}"}, "Next": "Again"},
            "Again": {
                "Type": "Choice",
                "Choices": [{"Condition": "{% $states.input.n < 1000 %}", "Next": "Count"}],
                "Default": "Done",
            },
            "Done": {"Type": "Succeed"},
        },
    )
    queue_url = sb.client("sqs").create_queue(QueueName="tokens")["QueueUrl"]
    # an action waiting for its event: a task token nobody sends, then JSONata in its Output
    awaiting = _machine(
        sb,
        {
            "Await": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Arguments": {"QueueUrl": queue_url, "MessageBody": "{% $states.context.Task.Token %}"},
                "Output": {"result": "{% $states.result %}"},
                "End": True,
            }
        },
    )
    arns = [sfn.start_execution(stateMachineArn=polling, input='{"n": 0}')["executionArn"] for _ in range(3)]
    arns.append(sfn.start_execution(stateMachineArn=awaiting)["executionArn"])
    _wait(lambda: all(_entered(sb, arn, "Nap") for arn in arns[:3]), "the polling executions waiting")
    _wait(lambda: sb.client("sqs").receive_message(QueueUrl=queue_url).get("Messages"), "the task token sent")
    backend = stepfunctions_parser_backends[sb.account_id][sb.region]
    executions = [
        cast(Execution, execution) for machine in backend.state_machines for execution in machine.executions
    ]

    sb.stop()
    sb.clock.advance(120)  # the clock runs on, as it did in the bench: the waits end

    assert moto_jsonata._eval_jsonata is None  # the seam is gone: moto cannot evaluate JSONata now
    deadline = time.monotonic() + 10.0
    while any(e.exec_status == ExecutionStatus.RUNNING for e in executions) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Before the fix the polling ones FAILED (States.Runtime, "TypeError('NoneType' object is not
    # callable)": the bench's error) and the one awaiting its token stayed RUNNING.
    assert [(e.exec_status, e.cause) for e in executions] == [(ExecutionStatus.ABORTED, None)] * 4
