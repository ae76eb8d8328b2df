"""SessionGuardFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from autopilot.settings.base import (
    FunctionSettings,
    comma_separated,
    from_environment,
)


class SessionGuardSettings(FunctionSettings):
    """What SessionGuardFunction needs (env var names are the aliases)."""

    reader = "SessionGuardFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The template parameter MaxSessionsPerUser: Active sessions a principal may hold on one cluster.
    max_sessions_per_user: int = Field(alias="MAX_SESSIONS_PER_USER", ge=1)
    # The template parameter ForbiddenRunAsUsers, comma-separated ("" forbids none).
    forbidden_run_as: Annotated[frozenset[str], BeforeValidator(comma_separated)] = Field(
        alias="FORBIDDEN_RUN_AS_USERS"
    )
    # The template parameter OwnerMatching: a plain role session is its role ("role") or itself
    # ("session") when sessions are counted per person (logic/callers.py, as the API's ownership).
    owner_matching: Literal["role", "session"] = Field(alias="OWNER_MATCHING", default="role")


session_guard_settings = from_environment(SessionGuardSettings)
