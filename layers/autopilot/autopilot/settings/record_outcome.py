"""RecordOutcomeFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class RecordOutcomeSettings(FunctionSettings):
    """What RecordOutcomeFunction needs (env var names are the aliases)."""

    reader = "RecordOutcomeFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


record_outcome_settings = from_environment(RecordOutcomeSettings)
