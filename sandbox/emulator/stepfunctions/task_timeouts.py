"""A task whose AWS call timed out fails as ``States.TaskFailed``, as a task that failed does.

moto's executor turns any exception a task's client raises that is not a ``ClientError`` into
``States.Runtime``, which no ``Retry`` or ``Catch`` (not even ``States.ALL``) can match: the
execution fails at once. A read timeout (the ``lost_response`` AWS call fault with ``answer:
"timeout"``, sandbox/emulator/aws_calls/faults.py) would then end a workflow that on AWS could retry or catch
it. ``install()`` makes botocore's ``ReadTimeoutError`` in any Task a ``States.TaskFailed`` failure
with the timeout as its cause. What Step Functions raises when its own SDK call times out is not
documented (docs/sandbox.md, "Unverified against AWS"); the optimized DynamoDB integration keeps
moto's own name for a non-service error (``DynamoDB.AmazonDynamoDBException``).
"""

from __future__ import annotations

from collections.abc import Callable

from botocore.exceptions import ReadTimeoutError
from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import FailureEvent
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import StateTask
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

from sandbox.emulator.patching import Patches, expect_signature


def install() -> Callable[[], None]:
    """Make a task's read timeout ``States.TaskFailed``; returns the undo."""
    seam = "fail_tasks_on_read_timeouts"
    original = expect_signature(StateTask, "_from_error", ["self", "env", "ex"], seam, exact=True)

    def from_error(self: StateTask, env: Environment, ex: Exception) -> FailureEvent:
        if not isinstance(ex, ReadTimeoutError):
            return original(self, env, ex)  # type: ignore[no-any-return]
        error = StatesErrorNameType.StatesTaskFailed
        details = TaskFailedEventDetails(error=error.to_name(), cause=str(ex))
        if isinstance(self, StateTaskService):  # the task's resource, as its other failures name it
            details["resource"] = self._get_sfn_resource()
            details["resourceType"] = self._get_sfn_resource_type()
        return FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=error),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(  # type: ignore[typeddict-item]
                taskFailedEventDetails=details
            ),
        )

    patches = Patches()
    patches.replace(StateTask, "_from_error", from_error)
    return patches.undo
