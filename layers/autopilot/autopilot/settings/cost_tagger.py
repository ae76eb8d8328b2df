"""CostTaggerFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    CostTagKeysSetting,
    FunctionSettings,
    from_environment,
)


class CostTaggerSettings(FunctionSettings):
    """What CostTaggerFunction needs (env var names are the aliases)."""

    reader = "CostTaggerFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameter CostTagKeys (autopilot.models.cost_allocation.parse_cost_tag_keys).
    cost_tag_keys: CostTagKeysSetting = Field(alias="COST_TAG_KEYS")


cost_tagger_settings = from_environment(CostTaggerSettings)
