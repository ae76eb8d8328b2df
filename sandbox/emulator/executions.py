"""Ending the Step Functions executions still running when the Sandbox stops (moto runs each in a
daemon thread that would outlive the mock).
"""

from __future__ import annotations

import time
from typing import cast

from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.backend.execution import Execution as StepFunctionsExecution
from moto.stepfunctions.parser.models import stepfunctions_parser_backends


def end_executions(timeout: float) -> None:
    """Abort every running Step Functions execution (as StopExecution does) and wait for them to end,
    while the seams are still installed. moto runs an execution in a daemon thread that outlives
    ``mock.stop()``: left running, it would go on in bare moto (its next JSONata expression calls
    moto's unset hook, ``TypeError('NoneType' object is not callable)``; its AWS calls unmocked)."""
    # the executing backend keeps its own Execution class in moto's StateMachine.executions
    running = [
        (backend, cast(StepFunctionsExecution, execution))
        for regions in stepfunctions_parser_backends.values()
        for backend in regions.values()
        for machine in list(backend.state_machines)
        for execution in list(machine.executions)
        if cast(StepFunctionsExecution, execution).exec_status == ExecutionStatus.RUNNING
    ]
    stopped: set[str] = set()
    deadline = time.monotonic() + timeout
    while running and time.monotonic() < deadline:
        for backend, execution in running:
            # an execution's thread builds its environment first; StopExecution needs it
            worker = execution.exec_worker
            if execution.execution_arn not in stopped and worker is not None and worker.env is not None:
                backend.stop_execution(execution.execution_arn)
                stopped.add(execution.execution_arn)
        time.sleep(0.01)
        # moto sets the status as the execution's thread ends
        running = [(b, e) for b, e in running if e.exec_status == ExecutionStatus.RUNNING]
