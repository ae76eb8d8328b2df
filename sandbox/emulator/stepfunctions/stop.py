"""StopExecution as Step Functions does it: the execution ends ABORTED at once, whatever it is doing.

moto (ported from LocalStack) marks a stopped execution's program ``ProgramStopped`` and wakes its
``Wait`` states, but a Task waiting for a task token (``.waitForTaskToken``) keeps waiting for a token
nobody sends (the execution stays RUNNING until its TimeoutSeconds, 99999999 s by default), and a
failure raised after the stop (the interrupted task, a Catch that can no longer choose its next state)
overwrites ``ProgramStopped`` with ``ProgramError``, so the execution ends FAILED. ``install()``:

- ``Execution.stop`` also interrupts every task-token wait of the execution (its callback endpoints);
- ``Environment.set_error`` / ``set_timed_out`` leave a stopped program stopped, so the execution
  ends ABORTED (and its Execution Status Change event says so, sandbox/emulator/stepfunctions/events.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackPoolManager
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.backend.execution import Execution

from sandbox.emulator.patching import Patches, SeamDrift, expect_signature


def _interrupt_token_waits(execution: Execution) -> None:
    env = getattr(execution.exec_worker, "env", None)
    pool = getattr(getattr(env, "callback_pool_manager", None), "_pool", None)
    for endpoint in list((pool or {}).values()):
        endpoint.interrupt_all()


def install() -> Callable[[], None]:
    """Make a stopped execution end ABORTED at once; returns the undo."""
    seam = "abort_stopped_executions"
    original_stop = expect_signature(
        Execution, "stop", ["self", "stop_date", "error", "cause"], seam, exact=True
    )
    original_set_error = expect_signature(Environment, "set_error", ["self", "error"], seam, exact=True)
    original_set_timed_out = expect_signature(Environment, "set_timed_out", ["self"], seam, exact=True)
    if "_pool" not in inspect.getsource(CallbackPoolManager.__init__):
        raise SeamDrift(f"{seam}: CallbackPoolManager no longer keeps its endpoints in _pool")

    def stop(self: Execution, stop_date: Any, error: str | None, cause: str | None) -> None:
        original_stop(self, stop_date, error, cause)
        _interrupt_token_waits(self)

    def set_error(self: Environment, error: Any) -> None:
        if not isinstance(self._program_state, ProgramStopped):
            original_set_error(self, error)

    def set_timed_out(self: Environment) -> None:
        if not isinstance(self._program_state, ProgramStopped):
            original_set_timed_out(self)

    patches = Patches()
    patches.replace(Execution, "stop", stop)
    patches.replace(Environment, "set_error", set_error)
    patches.replace(Environment, "set_timed_out", set_timed_out)
    return patches.undo
