"""moto's Step Functions executor on the sandbox clock: timers wait simulated seconds.

moto (ported from LocalStack) times every wait in wall seconds, so a 30-minute ``Wait`` blocks an
execution for 30 real minutes whatever the sandbox clock says. ``install(clock)`` moves every timer
the ASL can set onto the sandbox clock:

- ``Wait`` (``Seconds``, ``SecondsPath``, ``Timestamp``, ``TimestampPath``, JSONata or not):
  ``WaitFunction._wait_interval`` waits simulated seconds; a ``Timestamp`` is compared with the
  sandbox clock's now (moto compares it, naive, with the host's local time);
- ``Retry`` delays (``IntervalSeconds``, ``BackoffRate``, ``MaxDelaySeconds``, jitter): the
  ``time.sleep`` in ``retrier_decl`` sleeps simulated seconds;
- a Task waiting for a task token or an activity (``TimeoutSeconds``, ``HeartbeatSeconds``): the
  events of ``asl.eval.callback`` measure their timeouts in simulated seconds, so the task fails
  with ``States.Timeout`` after that much simulated time;
- the timestamps the ASL sees (``$states.context.Execution.StartTime``, ``State.EnteredTime``) and
  the execution's dates and history come from the sandbox clock; the two context times are written as
  Step Functions writes them, ISO 8601 in UTC with milliseconds and ``Z``
  (``2026-11-27T18:00:00.123Z``): moto wrote ``EnteredTime`` as ``...+00:00`` with microseconds, and
  left ``StartTime`` a datetime (``...+00:00`` in JSONata; in a JSONPath ``$$`` it broke the
  execution's output).

Not moved, on purpose: ``TimeoutSeconds`` of a synchronous Task (``lambda:invoke``, ``aws-sdk``) stays
wall time. Those tasks run in-process at wall speed; counting their wall time at speed 600 would time
out a one-second cold start as a ten-minute call.

A frozen clock (speed 0) holds every timer until ``clock.advance``: waits re-read the clock at
least every ``POLL_SECONDS`` of wall time for that reason.
"""

from __future__ import annotations

import datetime as datetime_module
import inspect
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import Any, Final

from moto.stepfunctions.parser import models as parser_models
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state import state as state_module
from moto.stepfunctions.parser.asl.component.state.wait.wait_function import timestamp as wait_timestamp
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
from moto.stepfunctions.parser.asl.eval.callback import callback
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event import event_manager
from moto.stepfunctions.parser.asl.eval.states import ExecutionData, StateData
from moto.stepfunctions.parser.backend import execution as backend_execution
from moto.stepfunctions.parser.backend import execution_worker

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.patching import Patches, SeamDrift, expect_signature

POLL_SECONDS: Final = 0.05

# Modules whose ``datetime.datetime.now()`` becomes the sandbox clock's now.
_DATED_MODULES: Final = (parser_models, backend_execution, event_manager, state_module, wait_timestamp)


class _Installed:
    clock: SandboxClock | None = None


def _clock() -> SandboxClock:
    clock = _Installed.clock
    if clock is None:
        raise RuntimeError("the Step Functions clock seam is not installed")
    return clock


class _Blocked:
    """How many threads wait in a timer, a retry delay or a task token right now: a test stepping a
    frozen clock moves it only once every execution waits (``blocked_threads``), never while one is
    still between two states on a starved thread."""

    count = 0
    # how many times a wait began or ended, or a task token's wait was answered: a driver that sees it
    # unchanged over a round knows no execution moved meanwhile (``changes``)
    changes = 0
    lock = threading.Lock()
    # by id of the wait: its clock and when its timer ends, in that clock's elapsed() seconds
    deadlines: dict[int, tuple[SandboxClock | None, float]] = {}

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.clock: SandboxClock | None = None

    def __enter__(self) -> None:
        with _Blocked.lock:
            _Blocked.count += 1
            _Blocked.changes += 1
            self.clock = _Installed.clock
            if self.deadline is not None:
                _Blocked.deadlines[id(self)] = (self.clock, self.deadline)
            _count_work(self.clock, -1)

    def __exit__(self, *_: object) -> None:
        with _Blocked.lock:
            _Blocked.count -= 1
            _Blocked.changes += 1
            _Blocked.deadlines.pop(id(self), None)
            _count_work(self.clock, +1)


# Executions between two waits are control-plane work (sandbox/emulator/clock.py): per clock, the executions
# evaluating their program (+1 each) less the waits on a timer or token (-1 each). moto hops threads (a
# program runs on a thread of its own, a Task on another, a task token's wait on a third), so executions
# are counted, not threads. Each count goes to the clock installed when it began, so an execution left
# running by an earlier install never skews a later clock. A Map or Parallel counts its parent program
# only (the branches are frames): with its branches waiting it counts as no work, which only makes the
# clock faster, as it was before work was counted. Guarded by ``_Blocked.lock``.
_work: Final[weakref.WeakKeyDictionary[SandboxClock, int]] = weakref.WeakKeyDictionary()


def _count_work(clock: SandboxClock | None, change: int) -> None:
    if clock is None:
        return
    _work[clock] = _work.get(clock, 0) + change
    clock.set_work("stepfunctions", _work[clock])


def blocked_threads() -> int:
    """Execution threads waiting on the sandbox clock or a task token (all executions, all stacks)."""
    with _Blocked.lock:
        return _Blocked.count


def next_deadline() -> float | None:
    """The earliest end of a timer an execution thread waits on now (a Wait, a retry delay, a task
    token's timeout), in the clock's ``elapsed()`` seconds; None when no thread waits on a timer. A
    driver of a frozen clock jumps to it instead of stepping (sandbox.apps.simulate)."""
    with _Blocked.lock:
        return min((deadline for _, deadline in _Blocked.deadlines.values()), default=None)


def timer_due(clock: SandboxClock) -> bool:
    """Whether a timer an execution thread waits on with ``clock`` has ended (the thread is about to
    wake and move on, within ``POLL_SECONDS``)."""
    elapsed = clock.elapsed()
    with _Blocked.lock:
        return any(c is clock and deadline <= elapsed for c, deadline in _Blocked.deadlines.values())


def changes() -> int:
    """A count that moves whenever an execution thread begins or ends a wait on a timer or a task
    token, or a task token's wait is answered (all executions, all stacks). A driver stepping a frozen
    clock that reads the same count before and after a round, with every execution waiting
    (``blocked_threads``) and no timer due (``timer_due``), knows none of them can move until it
    advances the clock again: it need not give their threads time first."""
    with _Blocked.lock:
        return _Blocked.changes


def wait_simulated(event: threading.Event, seconds: float) -> bool:
    """``event.wait`` with a timeout in simulated seconds: True when the event was set."""
    clock = _clock()
    deadline = clock.elapsed() + seconds
    with _Blocked(deadline):
        while True:
            remaining = deadline - clock.elapsed()
            if remaining <= 0:
                return event.is_set()
            if threading.Event.wait(event, min(clock.wall_seconds(remaining), POLL_SECONDS)):
                return True


def sleep_simulated(seconds: float) -> None:
    wait_simulated(threading.Event(), seconds)


class SimulatedTimeoutEvent(threading.Event):
    """A ``threading.Event`` whose ``wait(timeout)`` counts the timeout on the sandbox clock."""

    def set(self) -> None:
        with _Blocked.lock:
            _Blocked.changes += 1  # the waiter wakes: a driver must give it time (``changes``)
        super().set()

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            with _Blocked():
                return super().wait()
        return wait_simulated(self, timeout)


def aws_time(moment: datetime_module.datetime | str) -> str:
    """A context object time as Step Functions writes it: ISO 8601, UTC, milliseconds, ``Z``."""
    if isinstance(moment, str):
        moment = datetime_module.datetime.fromisoformat(moment)
    utc = moment.astimezone(datetime_module.UTC) if moment.tzinfo else moment
    return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def _execution_data(**members: Any) -> ExecutionData:
    return ExecutionData(**{**members, "StartTime": aws_time(members["StartTime"])})  # type: ignore[typeddict-item]


def _state_data(**members: Any) -> StateData:
    return StateData(**{**members, "EnteredTime": aws_time(members["EnteredTime"])})  # type: ignore[typeddict-item]


class _SandboxDatetime(datetime_module.datetime):
    """``datetime.datetime`` whose ``now`` is the sandbox clock's."""

    @classmethod
    def now(cls, tz: datetime_module.tzinfo | None = None) -> Any:
        current = _clock().now()
        # moto's naive now() is compared with naive UTC timestamps (Wait Timestamp): give UTC
        return (
            current.astimezone(tz)
            if tz is not None
            else current.astimezone(datetime_module.UTC).replace(tzinfo=None)
        )


class _SandboxDatetimeModule(types.ModuleType):
    """The ``datetime`` module as those moto modules see it: everything as is but ``datetime.now``."""

    datetime = _SandboxDatetime

    def __getattr__(self, name: str) -> Any:
        return getattr(datetime_module, name)


def _wait_interval(self: WaitFunction, env: Environment, wait_seconds: int) -> None:
    """moto's, in simulated seconds: program_state_event wakes the wait whenever the execution
    changes state; a stopped execution stops waiting, a running one waits out the rest."""
    clock = _clock()
    deadline = clock.elapsed() + wait_seconds
    while env.is_running():
        remaining = deadline - clock.elapsed()
        if remaining <= 0:
            return
        wait_simulated(env.program_state_event, remaining)


# --------------------------------------------------------------------------------------------------
# the seam
# --------------------------------------------------------------------------------------------------
def _check_shape() -> None:
    seam = "run_stepfunctions_on_sandbox_clock"
    wait = vars(WaitFunction).get("_wait_interval")
    if not callable(wait) or list(inspect.signature(wait).parameters) != ["self", "env", "wait_seconds"]:
        raise SeamDrift(f"{seam}: WaitFunction._wait_interval(self, env, wait_seconds) is gone")
    if "program_state_event.wait(" not in inspect.getsource(wait):
        raise SeamDrift(f"{seam}: WaitFunction._wait_interval no longer waits on program_state_event")
    if vars(retrier_decl).get("time") is not time or "time.sleep(" not in inspect.getsource(retrier_decl):
        raise SeamDrift(f"{seam}: retrier_decl no longer sleeps with time.sleep")
    if vars(callback).get("Event") is not threading.Event:
        raise SeamDrift(f"{seam}: asl.eval.callback no longer waits on threading.Event")
    if vars(state_module).get("StateData") is not StateData:
        raise SeamDrift(f"{seam}: moto's states no longer build their context State with StateData")
    if vars(execution_worker).get("ExecutionData") is not ExecutionData:
        raise SeamDrift(f"{seam}: moto's execution worker no longer builds the context with ExecutionData")
    for module in _DATED_MODULES:
        if vars(module).get("datetime") is not datetime_module:
            raise SeamDrift(f"{seam}: {module.__name__} no longer reads the time with datetime.datetime.now")


def install(clock: SandboxClock) -> Callable[[], None]:
    """Run moto's Step Functions timers and timestamps on ``clock``; returns the undo."""
    _check_shape()
    eval_body = expect_signature(
        Program, "_eval_body", ["self", "env"], "run_stepfunctions_on_sandbox_clock", exact=True
    )

    def counted_eval_body(self: Program, env: Environment) -> None:
        if env.is_frame():  # a Map iteration or Parallel branch: its execution is counted already
            eval_body(self, env)
            return
        with _Blocked.lock:
            counted = _Installed.clock
            _count_work(counted, +1)
        try:
            eval_body(self, env)
        finally:
            with _Blocked.lock:
                _count_work(counted, -1)

    patches = Patches()
    with _Blocked.lock:
        patches.replace(_Installed, "clock", clock)
    patches.replace(Program, "_eval_body", counted_eval_body)
    patches.replace(WaitFunction, "_wait_interval", _wait_interval)
    patches.replace(retrier_decl, "time", types.SimpleNamespace(sleep=sleep_simulated))
    patches.replace(callback, "Event", SimulatedTimeoutEvent)
    dated = _SandboxDatetimeModule("datetime")
    for module in _DATED_MODULES:
        patches.replace(module, "datetime", dated)
    patches.replace(state_module, "StateData", _state_data)
    patches.replace(execution_worker, "ExecutionData", _execution_data)

    def undo() -> None:
        with _Blocked.lock:
            patches.undo()
            _work.pop(clock, None)
            clock.set_work("stepfunctions", 0)

    return undo
