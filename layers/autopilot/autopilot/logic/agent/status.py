"""Is a cluster's Slurm agent there: connected (a report within AgentSilentSeconds, on the product
clock), silent (it reported once, not lately) or absent (never). ReplaceNodeStateMachine asks before a
Slurm-aware repair, GET /clusters/{name} shows it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from autopilot.errors import NotFoundError
from autopilot.models.records import iso

if TYPE_CHECKING:
    from autopilot.dal.agent import AgentTable
    from autopilot.logic.agent.trust import ControllerReader
    from autopilot.models.agent import AgentRecord
    from autopilot.models.values import AgentState

# A report may be late by two polls (a slow slurmctld, a retried request) before the agent is silent.
SILENT_POLLS = 3
MIN_SILENT_SECONDS = 60


def silent_after(poll_seconds: int) -> timedelta:
    """AgentSilentSeconds: max(60, 3 x AgentPollSeconds)."""
    return timedelta(seconds=max(MIN_SILENT_SECONDS, SILENT_POLLS * poll_seconds))


def agent_state(record: AgentRecord | None, now: datetime, poll_seconds: int) -> AgentState:
    if record is None:
        return "absent"
    return "connected" if now - record.last_seen <= silent_after(poll_seconds) else "silent"


def workflow_status(
    agents: AgentTable,
    controllers: ControllerReader,
    cluster_name: str,
    *,
    now: datetime,
    poll_seconds: int,
    node: str | None = None,
) -> dict[str, Any]:
    """The workflow's answer (docs/agent.md, "Workflow contract"); ``slurm`` is false for an EKS cluster
    and for one SageMaker does not have (the repair then goes on as today's, without the agent).
    ``node`` keeps only that Slurm node in ``nodes``: a large cluster's whole map could pass Step
    Functions' 256 KiB state payload."""
    try:
        described = controllers.describe(cluster_name)
        slurm = "Eks" not in (described.get("Orchestrator") or {})
    except NotFoundError:
        slurm = False
    record = agents.agent(cluster_name)
    return {
        "status": agent_state(record, now, poll_seconds),
        "lastSeen": iso(record.last_seen) if record else None,
        "version": record.agent_version if record else None,
        "slurm": slurm,
        "nodes": {
            name: view.model_dump(by_alias=True, mode="json")
            for name, view in (record.nodes if record else {}).items()
            if node is None or name == node
        },
    }
