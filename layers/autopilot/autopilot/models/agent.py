"""The Slurm agent's wire shapes (docs/agent.md; the agent itself is agent/autopilot_agent) and the
workflow's requests to AgentFunction.

The agent speaks camelCase JSON over ``POST /agent/{name}/reports``; ReplaceNodeStateMachine invokes
AgentFunction directly with ``{"command": {...}}`` (lambda:invoke.waitForTaskToken) or ``{"status":
{...}}``. Everything arriving is validated here, field by field, before anything is stored or sent.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from enum import StrEnum
from typing import Any, Self

from autopilot_config.models.constraints import NAME_PATTERN
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from autopilot.models.records import Time
from autopilot.models.values import SLURM_NAME

# SageMaker's ClusterName, anchored (pydantic's pattern matches anywhere in the string).
CLUSTER_NAME = f"^{NAME_PATTERN}$"

# A Slurm node name as HyperPod names them (``ip-10-1-2-3``) or any other hostname label: never a
# character a shell or scontrol's key=value syntax would read (the agent checks it against Slurm's list too).
SLURM_NODE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
# What one report may carry: a Slurm cluster of thousands of nodes, kept under API Gateway's 10 MB.
MAX_NODES = 10_000
MAX_JOBS_PER_NODE = 1_000
MAX_DETAIL_BYTES = 64 * 1024


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class Verb(StrEnum):
    """The agent's whole vocabulary (docs/agent.md, "Verbs")."""

    DRAIN = "drain"
    AWAIT_IDLE = "await_idle"
    REQUEUE = "requeue"
    RESUME = "resume"


class SlurmNode(_Wire):
    """One node as Slurm shows it: ``state`` is scontrol's State= text (base state, then +FLAGS)."""

    # The agent's own views carry no extra keys, but a newer agent may add some: keep them out of the
    # table rather than refusing the whole report.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    name: str = Field(pattern=SLURM_NODE_NAME)
    state: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="", max_length=1000)
    gpus: int = Field(default=0, ge=0, le=1024)
    jobs: list[str] = Field(default_factory=list, max_length=MAX_JOBS_PER_NODE)

    @property
    def base_state(self) -> str:
        return self.state.split("+", 1)[0].rstrip("*~#!%$@^-").upper()

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(flag.upper() for flag in self.state.split("+")[1:])

    @property
    def not_responding(self) -> bool:
        """slurmd does not answer slurmctld: scontrol's NOT_RESPONDING flag (sinfo's ``*`` suffix)."""
        return "NOT_RESPONDING" in self.flags or self.state.split("+", 1)[0].endswith("*")


class CommandResult(_Wire):
    command_id: str = Field(min_length=1, max_length=64)
    ok: bool
    error: str | None = Field(default=None, max_length=2000)
    # Per verb (docs/agent.md): {"node": ...}, and for requeue {"requeued", "notRequeued"} too.
    detail: dict[str, Any] = Field(default_factory=dict)

    @field_validator("detail")
    @classmethod
    def _fits_a_task_output(cls, detail: dict[str, Any]) -> dict[str, Any]:
        # It becomes the waiting state's output (Step Functions: 256 KiB per state).
        if len(json.dumps(detail)) > MAX_DETAIL_BYTES:
            raise ValueError(f"detail is over {MAX_DETAIL_BYTES} bytes")
        return detail


# The account of a job Slurm recorded without one (no default account, no AccountingStorageEnforce):
# in parentheses, so it is never taken for an account named "none".
NO_ACCOUNT = "(none)"
SLURM_ACCOUNT = r"^(\(none\)|[A-Za-z0-9_][A-Za-z0-9._@-]{0,127})$"
# Finished jobs one report may carry; the agent sends the rest in its next polls (its cursor advances
# only past what the control plane accepted).
MAX_FINISHED_JOBS = 2_000


class FinishedJob(_Wire):
    """One finished Slurm job from Slurm's accounting (sacct where slurmdbd runs, else the job
    completion log): what chargeback prices (docs/agent.md, "Finished jobs"). Reported at least once:
    the control plane counts a (cluster, jobId) once however often it arrives."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    # Slurm's job id (array and het jobs as sacct prints them: "123_4", "77+1")
    job_id: str = Field(pattern=r"^[0-9]+([_+][0-9]+)?$", max_length=40)
    account: str = Field(pattern=SLURM_ACCOUNT)  # "" never: a job without one is reported as NO_ACCOUNT
    user: str = Field(pattern=SLURM_NAME)
    partition: str = Field(default="", max_length=128)
    nodes: list[str] = Field(min_length=1, max_length=MAX_NODES)  # Slurm node names, expanded
    gpus: int = Field(default=0, ge=0, le=1_000_000)  # GPUs allocated to the job in all (AllocTRES gres/gpu)
    # CPUs allocated to the job in all (AllocTRES cpu, the job completion log's ProcCnt); None from an
    # agent older than it: a node without GPUs is then charged whole (logic/usage_pricing.py)
    cpus: int | None = Field(default=None, ge=1, le=10_000_000)
    start: datetime  # UTC, timezone-aware
    end: datetime
    state: str = Field(default="COMPLETED", max_length=40)  # COMPLETED, FAILED, TIMEOUT, CANCELLED...

    @field_validator("nodes")
    @classmethod
    def _node_names(cls, nodes: list[str]) -> list[str]:
        for node in nodes:
            if not re.fullmatch(SLURM_NODE_NAME, node):
                raise ValueError(f"{node!r} is not a Slurm node name")
        return nodes

    @field_validator("start", "end")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs a timezone (UTC)")
        return value

    @model_validator(mode="after")
    def _ends_after_it_starts(self) -> Self:
        if self.end < self.start:
            raise ValueError("end is before start")
        return self


class AgentReport(_Wire):
    """The body of ``POST /agent/{name}/reports``."""

    agent_version: str = Field(min_length=1, max_length=64)
    sent_at: str = Field(min_length=1, max_length=40)
    nodes: list[SlurmNode] = Field(default_factory=list, max_length=MAX_NODES)
    results: list[CommandResult] = Field(default_factory=list, max_length=1000)
    # finished jobs since the agent's last accepted report (an agent older than chargeback sends none)
    jobs: list[FinishedJob] = Field(default_factory=list, max_length=MAX_FINISHED_JOBS)


class CommandView(_Wire):
    """A command as the agent receives it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)

    command_id: str
    verb: Verb
    node: str
    reason: str | None = None
    deadline: Time
    # the sweep's resume: what the node must still show to be resumed ({"reasonPrefix": ...}), so a
    # drain an operator set since the report is never lifted (the agent refuses otherwise)
    expect: dict[str, str] | None = None

    def wire(self) -> dict[str, Any]:
        # "reason" is drain's alone, "expect" the sweep's resume's
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class CommandRequest(_Wire):
    """``{"command": {...}}`` from ReplaceNodeStateMachine (lambda:invoke.waitForTaskToken)."""

    cluster_name: str = Field(pattern=CLUSTER_NAME, max_length=63)
    node: str = Field(pattern=SLURM_NODE_NAME)
    verb: Verb
    reason: str | None = Field(default=None, min_length=1, max_length=1000)
    operation_id: str = Field(min_length=1, max_length=128)
    # The state's own TimeoutSeconds: past it the command is never handed out again.
    timeout_seconds: int = Field(ge=1, le=7 * 24 * 3600)
    task_token: str = Field(min_length=1, max_length=8192)
    # resume: the node's instance type, whose GPU count Slurm must show again (models/instance_types.py)
    # unless ``expected_gpus`` says otherwise.
    instance_type: str | None = Field(default=None, min_length=1, max_length=64)
    # resume: the gpu GRES count Slurm showed for the node before the repair (the agent's view), which
    # its slurm.conf gives the successor too; null when the workflow had no view.
    expected_gpus: int | None = Field(default=None, ge=0, le=1024)

    @model_validator(mode="after")
    def _verb_arguments(self) -> Self:
        if self.verb is Verb.DRAIN and not self.reason:
            raise ValueError("drain needs a reason (it names the operation in Slurm)")
        if self.verb is not Verb.DRAIN and self.reason is not None:
            raise ValueError(f"{self.verb.value} takes no reason")
        if self.verb is Verb.RESUME and self.instance_type is None:
            raise ValueError("resume needs instanceType (the GPU count Slurm must show)")
        return self


class StatusRequest(_Wire):
    """``{"status": {...}}`` from ReplaceNodeStateMachine (lambda:invoke)."""

    cluster_name: str = Field(pattern=CLUSTER_NAME, max_length=63)
    # Only this Slurm node's view in the answer's ``nodes`` (else every node's).
    node: str | None = Field(default=None, pattern=SLURM_NODE_NAME)


class _Item(BaseModel):
    """A state-table item (camelCase attribute names, docs/operations.md "State table")."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class AgentRecord(_Item):
    """``CLUSTER#<name>`` / ``AGENT``: the agent's latest report."""

    # On the product clock (autopilot.clock), when Autopilot accepted it: the agent's own sentAt is
    # its host's clock and is not trusted for liveness.
    last_seen: Time
    agent_version: str
    nodes: dict[str, SlurmNode] = Field(default_factory=dict)
    # Slurm node name -> when a report first showed it NOT_RESPONDING, on the product clock (kept while
    # the flag stays): the sweep repairs a node not responding past StuckNodeMinutes.
    not_responding_since: dict[str, Time] = Field(default_factory=dict)


class CommandStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"


class StoredCommand(_Item):
    """``CLUSTER#<name>`` / ``AGENTCMD#<commandId>``: a command waiting for the agent's result."""

    command_id: str
    verb: Verb
    node: str
    reason: str | None = None
    deadline: Time
    # None for the healing sweep's own resume of a node Slurm downed after a reboot: no workflow waits
    # on it, so its result only marks it done (logic/healing/slurm_signal.py).
    task_token: str | None = None
    operation_id: str | None = None
    status: CommandStatus = CommandStatus.PENDING
    # resume: the GPU count Slurm must show for the node to count as back (logic/agent/commands.py);
    # None: the state alone is checked.
    expected_gpus: int | None = None
    # the sweep's resume: the node's state it was sent for (CommandView.expect)
    expect: dict[str, str] | None = None

    def view(self) -> CommandView:
        return CommandView(
            command_id=self.command_id,
            verb=self.verb,
            node=self.node,
            reason=self.reason,
            deadline=self.deadline,
            expect=self.expect,
        )
