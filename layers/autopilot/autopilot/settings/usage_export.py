"""UsageExportFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class UsageExportSettings(FunctionSettings):
    """What UsageExportFunction needs (env var names are the aliases)."""

    reader = "UsageExportFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameters UsageExportBucket (empty: no export) and UsageExportPrefix.
    bucket: str = Field(alias="USAGE_EXPORT_BUCKET")
    prefix: str = Field(alias="USAGE_EXPORT_PREFIX")


usage_export_settings = from_environment(UsageExportSettings)
