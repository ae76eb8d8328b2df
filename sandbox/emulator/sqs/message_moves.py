"""SQS dead-letter queue redrive: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask.

moto 5.2.5 answers them ``NotImplementedError``. The seam (:meth:`MessageMoves.install`) adds the three
actions to moto's ``SQSResponse`` (which dispatches an action to the method of its snake-case name),
so in-process clients and ``sandbox up``'s endpoint reach them, and the ``intercept_aws_calls`` seam
authorizes and faults them first, as every call; it refuses to install once moto has its own.

As AWS documents them (SQS API reference; developer guide, "Learn how to configure a dead-letter queue
redrive"): the source must be the dead-letter queue of another SQS queue (else ``UnsupportedOperation``);
without ``DestinationArn`` each message goes back to its source queue — here, to the one queue whose
dead-letter queue it is (the sandbox does not remember a message's own source); a moved message is a
new message (new MessageId, enqueue time, receive count 0) with the same body and attributes;
ListMessageMoveTasks gives the 10 most recent tasks of a source, newest first.

Simplified (unverified against AWS, docs/sandbox.md): a task moves the messages visible at the call at
once and is ``COMPLETED`` when the call returns (AWS moves them asynchronously, at up to
``MaxNumberOfMessagesPerSecond``, within 36 hours), so CancelMessageMoveTask always finds it finished;
the error messages are the sandbox's.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from moto.core.responses import ActionResult
from moto.sqs.exceptions import SQSException
from moto.sqs.models import Queue, SQSBackend, sqs_backends
from moto.sqs.responses import SQSResponse

from sandbox.emulator.patching import SeamDrift

ACTIONS: Final = ("start_message_move_task", "list_message_move_tasks", "cancel_message_move_task")
LISTED: Final = 10

_lock = threading.Lock()
_tasks: dict[str, list[dict[str, Any]]] = {}  # source ARN -> its tasks, oldest first
_clock: list[Callable[[], datetime]] = []


class MessageMoves:
    """The redrive actions on moto's SQS, timestamped by ``now`` (the sandbox clock)."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self.now = now

    def install(self) -> None:
        with _lock:
            for action in ACTIONS:
                if action in SQSResponse.__dict__:
                    raise SeamDrift(f"sqs message moves: moto's SQSResponse has {action} of its own now")
            SQSResponse.start_message_move_task = _start  # type: ignore[attr-defined]
            SQSResponse.list_message_move_tasks = _list  # type: ignore[attr-defined]
            SQSResponse.cancel_message_move_task = _cancel  # type: ignore[attr-defined]
            _clock[:] = [self.now]
            _tasks.clear()

    def uninstall(self) -> None:
        with _lock:
            for action in ACTIONS:
                if action in SQSResponse.__dict__:
                    delattr(SQSResponse, action)
            _clock.clear()
            _tasks.clear()

    @staticmethod
    def tasks(source_arn: str) -> list[dict[str, Any]]:
        with _lock:
            return [dict(t) for t in _tasks.get(source_arn, [])]


def _queue_by_arn(backend: SQSBackend, arn: str) -> Queue:
    for queue in backend.queues.values():
        if queue.queue_arn == arn:
            return queue
    raise SQSException("ResourceNotFoundException", f"The queue {arn} does not exist.")


def _backend(arn: str) -> SQSBackend:
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise SQSException("ResourceNotFoundException", f"{arn} is not an SQS queue ARN.")
    return sqs_backends[parts[4]][parts[3]]


def _start(self: SQSResponse) -> ActionResult:
    source_arn = str(self._get_param("SourceArn"))
    destination_arn = self._get_param("DestinationArn")
    backend = _backend(source_arn)
    source = _queue_by_arn(backend, source_arn)
    feeding = backend.list_dead_letter_source_queues(source.name)
    if not feeding:
        raise SQSException(
            "UnsupportedOperation",
            "Source queue must be configured as a Dead Letter Queue of another SQS queue.",
        )
    if destination_arn is not None:
        destination = _queue_by_arn(_backend(str(destination_arn)), str(destination_arn))
    else:
        destination = feeding[0]
    moving = list(source.messages)  # the visible ones; in flight ones stay
    for message in moving:
        backend.send_message(destination.name, message.body, message_attributes=message.message_attributes)
    with source._messages_lock:
        source._messages = [m for m in source._messages if all(m is not moved for moved in moving)]
    task = {
        "TaskHandle": str(uuid.uuid4()),
        "Status": "COMPLETED",
        "SourceArn": source_arn,
        "ApproximateNumberOfMessagesMoved": len(moving),
        "ApproximateNumberOfMessagesToMove": len(moving),
        "StartedTimestamp": int(_clock[0]().timestamp() * 1000) if _clock else 0,
    }
    if destination_arn is not None:
        task["DestinationArn"] = str(destination_arn)
    if self._get_param("MaxNumberOfMessagesPerSecond") is not None:
        task["MaxNumberOfMessagesPerSecond"] = int(self._get_param("MaxNumberOfMessagesPerSecond"))
    with _lock:
        _tasks.setdefault(source_arn, []).append(task)
    return ActionResult({"TaskHandle": task["TaskHandle"]})


def _list(self: SQSResponse) -> ActionResult:
    source_arn = str(self._get_param("SourceArn"))
    _queue_by_arn(_backend(source_arn), source_arn)
    limit = int(self._get_param("MaxResults") or LISTED)
    with _lock:
        found = list(reversed(_tasks.get(source_arn, [])))[: min(limit, LISTED)]
    return ActionResult({"Results": [{k: v for k, v in t.items() if k != "TaskHandle"} for t in found]})


def _cancel(self: SQSResponse) -> ActionResult:
    handle = str(self._get_param("TaskHandle"))
    with _lock:
        task = next((t for tasks in _tasks.values() for t in tasks if t["TaskHandle"] == handle), None)
    if task is None:
        raise SQSException("ResourceNotFoundException", f"Task {handle} does not exist.")
    raise SQSException("UnsupportedOperation", f"Task {handle} is {task['Status']}, not RUNNING.")
