"""Dead-lettered cluster events go back to their queue (issue 20, finding 9).

A HyperPod event that failed ClusterEventsFunction 5 times, or that EventBridge could not deliver,
waits in ClusterEventsDeadLetterQueue (alarmed). Whatever failed it — throttling, a table or API
outage — has usually passed some minutes later, and the handler is idempotent, so every
REDRIVE_EVERY the healing sweep moves the dead letters back with SQS's redrive (StartMessageMoveTask,
DestinationArn the queue: EventBridge's dead letters have no source queue of their own). A message
that fails again comes back to the dead-letter queue and is tried at the next redrive, until its
retention (14 days) ends. The sweep itself covers what a lost event held that Autopilot already
recorded (an Unhealthy report no repair claimed, logic/healing/sweep.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# The delay before dead letters are tried again, and the least time between two redrives.
REDRIVE_EVERY = timedelta(minutes=30)
_ACTIVE = frozenset({"RUNNING", "CANCELLING"})


def redrive_dead_letters(sqs: SQSClient, *, dead_letter_arn: str, queue_arn: str, now: datetime) -> str:
    """Start a redrive of the dead-letter queue into the queue unless one is running or started
    within REDRIVE_EVERY; what happened (``started``, ``running``, ``waiting``)."""
    latest = sqs.list_message_move_tasks(SourceArn=dead_letter_arn, MaxResults=1).get("Results", [])
    if latest:
        task = latest[0]
        if task.get("Status") in _ACTIVE:
            return "running"
        started = datetime.fromtimestamp(int(task.get("StartedTimestamp", 0)) / 1000, UTC)
        if now - started < REDRIVE_EVERY:
            return "waiting"
    handle = sqs.start_message_move_task(SourceArn=dead_letter_arn, DestinationArn=queue_arn)["TaskHandle"]
    logger.info("dead-lettered cluster events redriven", task=handle, source=dead_letter_arn)
    return "started"
