"""A workflow's command for a cluster's Slurm agent (``{"command": {...}}``, invoked by
ReplaceNodeStateMachine with lambda:invoke.waitForTaskToken): stored with the task token and a
deadline; the agent fetches it with its next report, and its result completes the task
(autopilot.logic.agent.reports). Nothing here waits: the state's own TimeoutSeconds is the deadline,
so a silent agent ends in States.Timeout, never a wait forever."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from autopilot.models.agent import CommandRequest, StoredCommand, Verb
from autopilot.models.instance_types import gpus_for
from autopilot.models.records import iso

if TYPE_CHECKING:
    from autopilot.dal.agent import AgentTable


def command_id(task_token: str) -> str:
    """One id per task token: Lambda's or Step Functions' retry of the same invoke stores nothing new."""
    return hashlib.sha256(task_token.encode()).hexdigest()[:32]


def enqueue_command(agents: AgentTable, request: CommandRequest, *, now: datetime) -> dict[str, Any]:
    deadline = now + timedelta(seconds=request.timeout_seconds)
    command = StoredCommand(
        command_id=command_id(request.task_token),
        verb=request.verb,
        node=request.node,
        reason=request.reason,
        deadline=iso(deadline),
        task_token=request.task_token,
        operation_id=request.operation_id,
        expected_gpus=gpus_for(request.instance_type)
        if request.verb is Verb.RESUME and request.instance_type
        else None,
    )
    agents.add_command(request.cluster_name, command, deadline=deadline)
    return {"commandId": command.command_id, "deadline": command.deadline}
