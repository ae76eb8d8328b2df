"""Step Functions' "Step Functions Execution Status Change" events, which moto never sends.

Step Functions puts one event on the account's default bus when a Standard execution starts (RUNNING)
and when it ends (SUCCEEDED, FAILED, TIMED_OUT, ABORTED); Express executions send none. ``install()``
makes moto's executor do the same: the RUNNING event as the execution starts, the final one once the
worker has set the execution's final status (``BaseExecutionWorkerCommunication.terminated``), so a
rule on ``aws.states`` reaches its targets through the sandbox's EventBridge delivery.

Shaped as AWS's samples (events/stepfunctions/, from the Step Functions developer guide): ``detail``
carries what DescribeExecution returns, dates in epoch milliseconds, ``input`` / ``output`` as JSON
text with ``inputDetails`` / ``outputDetails``, ``stopDate`` / ``output`` / ``outputDetails`` null
where AWS's samples have null. ``error`` and ``cause`` are added when the execution has them, as
DescribeExecution returns them (the guide says the detail is DescribeExecution's; its samples show
none: unverified). Not simulated: the 248 KB truncation of input and output, redrive fields.
moto's StopExecution drops the request's error and cause, so an aborted execution has neither.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from moto.stepfunctions.parser.api import StateMachineType
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution

from sandbox.emulator import bus
from sandbox.emulator.patching import Patches, SeamDrift, expect_signature

SOURCE: Final = "aws.states"
DETAIL_TYPE: Final = "Step Functions Execution Status Change"
RUNNING: Final = "RUNNING"


def _millis(moment: datetime | None) -> int | None:
    return round(moment.timestamp() * 1000) if moment is not None else None


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def status_change_detail(execution: Execution, status: str) -> dict[str, Any]:
    """The event's detail for ``execution`` in ``status`` (DescribeExecution's members)."""
    listed = execution.to_execution_list_item()
    succeeded = status == "SUCCEEDED"
    detail: dict[str, Any] = {
        "executionArn": execution.exec_arn,
        "stateMachineArn": listed["stateMachineArn"],
        "name": execution.name,
        "status": status,
        "startDate": _millis(execution.start_date),
        "stopDate": None if status == RUNNING else _millis(execution.stop_date),
        "input": _compact(execution.input_data),
        "inputDetails": {"included": True},
        "output": _compact(execution.output) if succeeded else None,
        "outputDetails": {"included": True} if succeeded else None,
    }
    if status != RUNNING:
        if execution.error is not None:
            detail["error"] = execution.error
        if execution.cause is not None:
            detail["cause"] = execution.cause
    return detail


def _emit(execution: Execution, status: str) -> None:
    # moto's state machine keeps its type in ``type`` (its ``sm_type`` always says STANDARD)
    kind = getattr(execution.state_machine, "type", None) or execution.sm_type
    if kind != StateMachineType.STANDARD:
        return  # Express workflows do not send these events
    moment = execution.start_date if status == RUNNING else execution.stop_date
    bus.emit(
        SOURCE,
        DETAIL_TYPE,
        status_change_detail(execution, status),
        resources=[execution.exec_arn],
        region=execution.region_name,
        account_id=execution.account_id,
        time=moment,
    )


def install() -> Callable[[], None]:
    """Send the events from moto's executor; returns the undo."""
    seam = "emit_execution_status_events"
    original_start = expect_signature(Execution, "start", ["self"], seam, exact=True)
    original_terminated = expect_signature(
        BaseExecutionWorkerCommunication, "terminated", ["self"], seam, exact=True
    )
    if "_reflect_execution_status" not in BaseExecutionWorkerCommunication.__dict__:
        raise SeamDrift(f"{seam}: BaseExecutionWorkerCommunication._reflect_execution_status is gone")

    def start(self: Execution) -> None:
        # Sent before the worker thread runs, so RUNNING always precedes the final event.
        _emit(self, RUNNING)
        original_start(self)

    def terminated(self: BaseExecutionWorkerCommunication) -> None:
        original_terminated(self)
        status = self.execution.exec_status
        if status is not None:
            _emit(self.execution, str(status.value if hasattr(status, "value") else status))

    patches = Patches()
    patches.replace(Execution, "start", start)
    patches.replace(BaseExecutionWorkerCommunication, "terminated", terminated)
    return patches.undo
