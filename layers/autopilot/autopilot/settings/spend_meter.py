"""SpendMeterFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class SpendMeterSettings(FunctionSettings):
    """What SpendMeterFunction needs (env var names are the aliases)."""

    reader = "SpendMeterFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The stack's region (Lambda sets AWS_REGION): its clusters' nodes are priced at its list prices.
    region: str = Field(alias="AWS_REGION", min_length=1)


spend_meter_settings = from_environment(SpendMeterSettings)
