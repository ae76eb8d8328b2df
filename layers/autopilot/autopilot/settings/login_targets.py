"""LoginTargetsFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class LoginTargetsSettings(FunctionSettings):
    """What LoginTargetsFunction needs (env var names are the aliases)."""

    reader = "LoginTargetsFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


login_targets_settings = from_environment(LoginTargetsSettings)
