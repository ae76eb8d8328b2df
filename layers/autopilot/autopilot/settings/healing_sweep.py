"""HealingSweepFunction's own settings, beside the healing ones (autopilot.settings)."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    AGENT_POLL_LIMIT,
    FunctionSettings,
    from_environment,
)


class HealingSweepSettings(FunctionSettings):
    """What the healing sweep (HealingSweepFunction) needs beside HealingSettings; env var names are the
    aliases."""

    reader = "healing sweep"

    # The template parameter StuckNodeMinutes: a node not Running for this long is repaired.
    stuck_node_minutes: int = Field(alias="STUCK_NODE_MINUTES", ge=1)
    # The template parameter AgentPollSeconds: a Slurm agent silent past max(60, 3 x it) is not trusted
    # for the sweep's Slurm signals (logic/agent/status.py).
    agent_poll_seconds: int = Field(alias="AGENT_POLL_SECONDS", ge=1, le=AGENT_POLL_LIMIT)
    # The redrive of dead-lettered cluster events (logic/redrive_events.py): from the one into the other.
    cluster_events_dead_letter_queue_arn: str = Field(
        alias="CLUSTER_EVENTS_DEAD_LETTER_QUEUE_ARN", min_length=1
    )
    cluster_events_queue_arn: str = Field(alias="CLUSTER_EVENTS_QUEUE_ARN", min_length=1)


healing_sweep_settings = from_environment(HealingSweepSettings)
