"""A workflow's command for a cluster's Slurm agent (``{"command": {...}}``, invoked by
ReplaceNodeStateMachine with lambda:invoke.waitForTaskToken): stored with the task token and a
deadline; the agent fetches it with its next report, and its result completes the task
(autopilot.logic.agent.reports). Nothing here waits: the state's own TimeoutSeconds is the deadline,
so a silent agent ends in States.Timeout, never a wait forever."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from autopilot_config.models.instance_types import gpus_for

from autopilot.models.agent import CommandRequest, StoredCommand, Verb
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
        deadline=deadline,
        task_token=request.task_token,
        operation_id=request.operation_id,
        expected_gpus=expected_gpus(request) if request.verb is Verb.RESUME else None,
    )
    agents.add_command(request.cluster_name, command, deadline=deadline)
    return {"commandId": command.command_id, "deadline": iso(command.deadline)}


def expected_gpus(request: CommandRequest) -> int | None:
    """The GPU count a resumed node must show in Slurm: what it showed before the repair (the workflow
    passes the agent's view: its slurm.conf describes the successor the same way), else its instance
    type's. None (the state alone is checked) when that is 0: a cluster whose slurm.conf declares no
    gpu GRES, or an instance type Autopilot does not know, must not fail every repair."""
    if request.expected_gpus is not None:
        count = request.expected_gpus
    else:
        count = gpus_for(request.instance_type) if request.instance_type else 0
    return count or None
