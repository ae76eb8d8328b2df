"""Environment configuration as pydantic models, validated on first use.

Each function reads only the settings it needs; a missing or malformed variable fails loudly with
the variable's name (no silent defaults). Tests set the environment (from template.yaml) and call
``cache_clear()`` on the loader.
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class SettingsError(RuntimeError):
    """A required environment variable is missing or malformed."""


class ApiSettings(BaseModel):
    """What the API function needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    create_cluster_state_machine_arn: str = Field(alias="CREATE_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    cleanup_cluster_state_machine_arn: str = Field(alias="CLEANUP_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    idempotency_table_name: str = Field(alias="IDEMPOTENCY_TABLE_NAME", min_length=1)


def load_api_settings_from(environ: dict[str, str]) -> ApiSettings:
    try:
        return ApiSettings.model_validate(environ)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise SettingsError(f"invalid API function environment: {problems}") from exc


@lru_cache(maxsize=1)
def api_settings() -> ApiSettings:
    """The API function's settings, read from the environment once."""
    return load_api_settings_from(dict(os.environ))
