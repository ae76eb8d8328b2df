"""``POST /agent/{name}/reports``: one round trip of a cluster's Slurm agent — heartbeat, node report,
command results, and the commands still pending for it (docs/agent.md).

In order: the caller must be the cluster's controller (trust.py; a refusal is logged, counted as
UntrustedAgentReports and stores nothing), the body must have the report's shape (400 naming the
field), then the report is stored as the cluster's latest view (lastSeen on the product clock), each
result completes its command's workflow task, and the answer lists the commands not yet done nor past
their deadline. The report's finished jobs are then priced and counted for chargeback
(logic/usage_ingest.py): a failure there fails the answer, so the agent sends the same jobs again (its
cursor advances only past an accepted report). A result for a command that is unknown, done, or whose
task is gone (timed out, already completed) changes nothing: the agent repeats a result until it sees
the command leave its list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import ValidationError

from autopilot.aws import error_code
from autopilot.logic.agent.trust import ControllerReader, UntrustedReportError, check_reporter
from autopilot.models.agent import (
    AgentRecord,
    AgentReport,
    CommandResult,
    CommandStatus,
    SlurmNode,
    StoredCommand,
    Verb,
)
from autopilot.observability import Count, count, logger

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.dal.agent import AgentTable
    from autopilot.logic.usage_ingest import UsageDeps

COMMAND_FAILED = "Autopilot.AgentCommandFailed"
NOT_BACK_IN_SLURM = "Autopilot.NodeNotBackInSlurm"
# The task is no longer waiting (it timed out, its execution ended, or this result was sent before).
_TASK_GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})
# A node Slurm can schedule again: its base state, and flags none of which may be set.
SCHEDULABLE_STATES = frozenset({"IDLE", "MIXED", "ALLOCATED", "COMPLETING"})
UNSCHEDULABLE_FLAGS = frozenset({"DRAIN", "DOWN", "NOT_RESPONDING", "FAIL"})
_MAX_CAUSE = 32_768  # SendTaskFailure's cause


class InvalidReportError(ValueError):
    """The body is not a report (answered 400, naming the field)."""


@dataclass
class AgentDeps:
    agents: AgentTable
    controllers: ControllerReader
    stepfunctions: SFNClient
    poll_seconds: int
    # the stack's account: only its roles may report
    account: str
    now: Callable[[], datetime]
    # chargeback's intake of the report's finished jobs (None: a report's jobs are refused with a 400);
    # a callable builds it on the first report with jobs (the wiring's: commands, status answers and
    # reports without jobs never import chargeback's pricing, usage and budget alerts)
    usage: UsageDeps | Callable[[], UsageDeps] | None = None


def handle_report(
    deps: AgentDeps, cluster_name: str, user_arn: str | None, body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The agent's answer: ``{"commands": [...], "pollSeconds": n}``."""
    try:
        check_reporter(deps.controllers, cluster_name, user_arn, account=deps.account)
    except UntrustedReportError as exc:
        logger.warning("untrusted agent report refused", cluster=cluster_name, caller=user_arn, why=str(exc))
        count(Count.UNTRUSTED_AGENT_REPORTS)
        raise
    report = parse_report(body)
    now = deps.now()
    deps.agents.record_report(
        cluster_name,
        AgentRecord(
            last_seen=now,
            agent_version=report.agent_version,
            nodes={n.name: n for n in report.nodes},
            not_responding_since=not_responding_since(deps.agents, cluster_name, report.nodes, now),
        ),
    )
    for result in report.results:
        command = deps.agents.command(cluster_name, result.command_id)
        if command is None or command.status is not CommandStatus.PENDING:
            logger.info("result of no pending command", cluster=cluster_name, command_id=result.command_id)
            continue
        complete(deps.stepfunctions, command, result)
        deps.agents.finish_command(cluster_name, command.command_id)
    rejected = ingest(deps, cluster_name, report, now) if report.jobs else []
    pending = deps.agents.pending_commands(cluster_name, after=now)
    answer: dict[str, Any] = {
        "commands": [c.view().wire() for c in sorted(pending, key=lambda c: (c.deadline, c.command_id))],
        "pollSeconds": deps.poll_seconds,
    }
    if rejected:  # refused for good, never counted: the agent moves its cursor past them all the same
        answer["rejectedJobs"] = rejected
    return answer


def ingest(deps: AgentDeps, cluster_name: str, report: AgentReport, now: datetime) -> list[dict[str, str]]:
    """The jobs refused one by one (logic/usage_ingest.py rejection); the others counted."""
    if deps.usage is None:
        raise InvalidReportError("jobs: this control plane does not take finished jobs")
    from autopilot.logic.usage_ingest import ingest_jobs  # noqa: PLC0415  (only a report with jobs needs it)

    usage = deps.usage() if callable(deps.usage) else deps.usage
    return ingest_jobs(usage, cluster_name, report.jobs, running=report.nodes, now=now).rejected


def not_responding_since(
    agents: AgentTable, cluster_name: str, nodes: list[SlurmNode], now: datetime
) -> dict[str, datetime]:
    """When each node not responding now was first reported so: the previous report's time while the
    flag stays, else now (the sweep counts StuckNodeMinutes from it). The previous report is read only
    when a node is not responding."""
    flagged = [n.name for n in nodes if n.not_responding]
    if not flagged:
        return {}
    previous = agents.agent(cluster_name)
    known = previous.not_responding_since if previous else {}
    return {name: known.get(name, now) for name in flagged}


def parse_report(body: Mapping[str, Any] | None) -> AgentReport:
    if not isinstance(body, Mapping):
        raise InvalidReportError("the body must be a JSON object")
    try:
        return AgentReport.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidReportError(f"{where}: {first['msg']}") from exc


def complete(stepfunctions: SFNClient, command: StoredCommand, result: CommandResult) -> None:
    """End the workflow task waiting on the command: success with the result's detail, or failure."""
    if command.task_token is None:
        # the healing sweep's own resume: nothing waits on it (marking it done is all)
        logger.info(
            "sweep's agent command completed",
            command_id=command.command_id,
            verb=command.verb.value,
            node=command.node,
            ok=result.ok,
            error=result.error,
        )
        return
    failure: tuple[str, str] | None = None
    if not result.ok:
        failure = (COMMAND_FAILED, result.error or f"the agent reported {command.verb.value} failed")
    elif command.verb is Verb.RESUME:
        problem = not_back_in_slurm(command, result.detail.get("node"))
        if problem:
            failure = (NOT_BACK_IN_SLURM, problem)
    try:
        if failure is None:
            stepfunctions.send_task_success(
                taskToken=command.task_token, output=json.dumps({**result.detail, "ok": True})
            )
        else:
            stepfunctions.send_task_failure(
                taskToken=command.task_token, error=failure[0], cause=failure[1][:_MAX_CAUSE]
            )
    except ClientError as exc:
        if error_code(exc) not in _TASK_GONE:
            raise
        logger.info("command's task no longer waits", command_id=command.command_id, code=error_code(exc))
        return
    logger.info(
        "agent command completed",
        command_id=command.command_id,
        operation_id=command.operation_id,
        verb=command.verb.value,
        node=command.node,
        error=failure[0] if failure else None,
    )


def not_back_in_slurm(command: StoredCommand, reported: Any) -> str | None:
    """Why the resumed node is not schedulable with its GPUs, or None when it is."""
    try:
        node = SlurmNode.model_validate(reported)
    except ValidationError:
        return f"the agent's resume result for {command.node} carries no node view"
    if node.name != command.node:
        return f"the agent's resume result is for {node.name}, not {command.node}"
    flags = node.flags & UNSCHEDULABLE_FLAGS
    if node.base_state not in SCHEDULABLE_STATES or flags:
        return f"node {node.name} is {node.state} in Slurm" + (f" ({node.reason})" if node.reason else "")
    if command.expected_gpus is not None and node.gpus != command.expected_gpus:
        return f"node {node.name} shows {node.gpus} GPUs in Slurm, {command.expected_gpus} expected"
    return None
