"""Step Functions' quotas that moto's executor leaves out or applies differently.

AWS ("Step Functions service quotas", "Handling errors in Step Functions workflows"):

- **256 KiB payloads.** A task's result, a state's output, and an execution's input are at most
  262,144 bytes "as a UTF-8 encoded string". Over it, the state fails with ``States.DataLimitExceeded``
  ("The state/task '<name>' returned a result with a size exceeding the maximum number of bytes service
  limit.", the cause AWS's executions show), a terminal error ``States.ALL`` does not catch (an
  ``ErrorEquals`` naming it does). moto raises it, but measures a string result without its quotes and
  non-ASCII text escaped, refuses exactly 262,144 bytes, and lets ``States.ALL`` catch (and retry) it:
  the seam measures the compact JSON text in UTF-8, allows the limit itself, and keeps ``States.ALL``
  from matching. StartExecution refuses an input over the limit (``ValidationException``, the
  service's length-constraint message; moto accepted any input).
- **25,000 history events.** An execution whose history reaches the quota fails: its 25,000th event is
  ``ExecutionFailed`` with ``States.Runtime`` / "The execution reached the maximum number of history
  events (25000)." (an observed answer: event 24,999 is the last one the states produced). moto's
  histories grow without end, so a workflow that loops (a poll, a retry that never gives up) ran forever
  here. The seam counts each Standard execution's events (Map iterations and Parallel branches write into
  their execution's history, as on AWS) and ends the execution that way; the events its states would
  still produce are not recorded. ``MAX_HISTORY_EVENTS`` is read at each event, so a test can lower it.
"""

from __future__ import annotations

import datetime
import inspect
import json
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

from moto.stepfunctions.exceptions import ValidationException
from moto.stepfunctions.parser import quotas
from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType, StateMachineType
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state import state as state_module
from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_lambda
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.eval.event.event_manager import (
    EventHistoryContext,
    EventIdGenerator,
    EventManager,
)
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from sandbox.emulator.patching import Patches, SeamDrift, expect_signature

MAX_PAYLOAD_BYTES: Final = 262_144
MAX_HISTORY_EVENTS = 25_000  # not Final: a test lowers it rather than run 25,000 events
DATA_LIMIT_EXCEEDED: Final = StatesErrorName(typ=StatesErrorNameType.StatesStatesDataLimitExceeded)
# The modules that imported moto's size check by name.
_SIZE_CHECKERS: Final = (state_module, state_task_lambda, state_task_service)
_TERMINAL_EVENTS: Final = frozenset(
    {
        HistoryEventType.ExecutionSucceeded,
        HistoryEventType.ExecutionFailed,
        HistoryEventType.ExecutionAborted,
        HistoryEventType.ExecutionTimedOut,
    }
)


def history_limit_cause(limit: int) -> str:
    return f"The execution reached the maximum number of history events ({limit})."


def payload_bytes(value: Any) -> int:
    """The size Step Functions limits: the value as compact JSON text, in UTF-8."""
    return len(_json(value).encode("utf-8"))


def _json(value: Any) -> str:
    def default(other: Any) -> str:
        return other.isoformat() if isinstance(other, (datetime.date, datetime.datetime)) else str(other)

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=default)


def is_within_size_quota(value: Any) -> bool:
    return payload_bytes(value) <= MAX_PAYLOAD_BYTES


class _Histories:
    """Each root execution environment by its event manager (frames share their root's manager), and
    the failure of the executions that reached the quota (their later events are dropped)."""

    lock: Final = threading.Lock()
    owners: weakref.WeakKeyDictionary[EventManager, Environment] = weakref.WeakKeyDictionary()
    capped: weakref.WeakKeyDictionary[EventManager, ExecutionFailedEventDetails] = weakref.WeakKeyDictionary()


def install() -> Callable[[], None]:
    """Apply the payload and history quotas to moto's executor; returns the undo."""
    seam = "apply_stepfunctions_quotas"
    for module in _SIZE_CHECKERS:
        if vars(module).get("is_within_size_quota") is not quotas.is_within_size_quota:
            raise SeamDrift(f"{seam}: {module.__name__} no longer checks sizes with is_within_size_quota")
    eval_errors = expect_signature(ErrorEqualsDecl, "_eval_body", ["self", "env"], seam, exact=True)
    if "_STATE_ALL_ERROR in self.error_names" not in inspect.getsource(eval_errors):
        raise SeamDrift(f"{seam}: ErrorEqualsDecl._eval_body no longer matches States.ALL itself")
    # a prefix: name_unnamed_executions may have wrapped it already (``*args, **kwargs`` after these)
    start_execution = expect_signature(
        StepFunctionsParserBackend,
        "start_execution",
        ["self", "state_machine_arn", "name", "execution_input"],
        seam,
    )
    init = expect_signature(
        Environment,
        "__init__",
        [
            "self",
            "aws_execution_details",
            "execution_type",
            "context",
            "event_history_context",
            "cloud_watch_logging_session",
            "activity_store",
            "variable_store",
            "mock_test_case",
        ],
        seam,
        exact=True,
    )
    add_event = expect_signature(
        EventManager,
        "add_event",
        ["self", "context", "event_type", "event_details", "timestamp", "update_source_event_id"],
        seam,
        exact=True,
    )
    set_error = expect_signature(Environment, "set_error", ["self", "error"], seam, exact=True)
    if getattr(EventIdGenerator(), "_next_id", None) != 1:  # type: ignore[no-untyped-call]
        raise SeamDrift(f"{seam}: EventIdGenerator no longer counts events in _next_id")

    def error_equals(self: ErrorEqualsDecl, env: Environment) -> None:
        raised = env.stack[-1] if env.stack else None
        eval_errors(self, env)
        if raised == DATA_LIMIT_EXCEEDED and DATA_LIMIT_EXCEEDED not in self.error_names:
            env.stack[-1] = False  # States.ALL does not catch this terminal error

    def start(
        self: StepFunctionsParserBackend,
        state_machine_arn: str,
        name: Any = None,
        execution_input: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if execution_input is not None and len(str(execution_input).encode("utf-8")) > MAX_PAYLOAD_BYTES:
            raise ValidationException(
                "1 validation error detected: Value at 'input' failed to satisfy constraint: "
                f"Member must have length less than or equal to {MAX_PAYLOAD_BYTES}"
            )
        return start_execution(self, state_machine_arn, name, execution_input, *args, **kwargs)

    def environment(self: Environment, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        with _Histories.lock:  # a frame's own manager is replaced by its root's right after
            _Histories.owners[self.event_manager] = self

    def event(  # noqa: PLR0917 - moto's signature
        self: EventManager,
        context: EventHistoryContext,
        event_type: HistoryEventType,
        event_details: EventDetails | None = None,
        timestamp: Any = None,
        update_source_event_id: bool = True,
    ) -> int:
        limit = MAX_HISTORY_EVENTS
        with _Histories.lock:
            if self in _Histories.capped:
                return limit  # the execution ended on the quota: nothing more is recorded
            owner = _Histories.owners.get(self)
            standard = owner is not None and owner.execution_type == StateMachineType.STANDARD
            reaching = self._event_id_gen._next_id >= limit and event_type not in _TERMINAL_EVENTS
            if standard and reaching:
                failure = ExecutionFailedEventDetails(
                    error="States.Runtime", cause=history_limit_cause(limit)
                )
                _Histories.capped[self] = failure
        if not (standard and reaching):
            return int(add_event(self, context, event_type, event_details, timestamp, update_source_event_id))
        event_id = int(
            add_event(
                self,
                context,
                HistoryEventType.ExecutionFailed,
                EventDetails(executionFailedEventDetails=failure),  # type: ignore[typeddict-item]
                None,
                False,
            )
        )
        assert owner is not None
        set_error(owner, failure)  # the program stops; later failures cannot replace this one
        return event_id

    def keep_history_failure(self: Environment, error: Any) -> None:
        failure = _Histories.capped.get(self.event_manager)
        if failure is None or error is failure:  # the quota's failure reaches the frames too
            set_error(self, error)

    patches = Patches()
    for module in _SIZE_CHECKERS:
        patches.replace(module, "is_within_size_quota", is_within_size_quota)
    patches.replace(ErrorEqualsDecl, "_eval_body", error_equals)
    patches.replace(StepFunctionsParserBackend, "start_execution", start)
    patches.replace(Environment, "__init__", environment)
    patches.replace(EventManager, "add_event", event)
    patches.replace(Environment, "set_error", keep_history_failure)
    return patches.undo
