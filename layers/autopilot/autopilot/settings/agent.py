"""AgentFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    AGENT_POLL_LIMIT,
    FunctionSettings,
    from_environment,
)


class AgentSettings(FunctionSettings):
    """What AgentFunction needs (env var names are the aliases)."""

    reader = "AgentFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameter AgentPollSeconds: how often the agent reports (the response tells it).
    poll_seconds: int = Field(alias="AGENT_POLL_SECONDS", ge=1, le=AGENT_POLL_LIMIT)
    # Chargeback: department budget alerts go to the alerts topic; the report's finished jobs are
    # priced at the stack region's list prices (Lambda sets AWS_REGION).
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    region: str = Field(alias="AWS_REGION", min_length=1)


agent_settings = from_environment(AgentSettings)
