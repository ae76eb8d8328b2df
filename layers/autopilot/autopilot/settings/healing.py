"""The healing settings (autopilot.settings): what every function that starts or shows repairs reads."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class HealingSettings(FunctionSettings):
    """How repairs start and are bounded: the healing template parameters (docs/operations.md,
    "Healing policy"), for every function that starts or shows repairs (env var names are the aliases).
    """

    reader = "healing"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    replace_node_state_machine_arn: str = Field(alias="REPLACE_NODE_STATE_MACHINE_ARN", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    max_concurrent_repairs: int = Field(alias="MAX_CONCURRENT_REPAIRS", ge=1)
    max_unhealthy_percent: int = Field(alias="MAX_UNHEALTHY_PERCENT", ge=1, le=100)
    breaker_window_minutes: int = Field(alias="BREAKER_WINDOW_MINUTES", ge=1)
    reboot_deadline_minutes: int = Field(alias="REBOOT_DEADLINE_MINUTES", ge=1)
    hyperpod_repair_deadline_minutes: int = Field(alias="HYPERPOD_REPAIR_DEADLINE_MINUTES", ge=1)
    replace_deadline_minutes: int = Field(alias="REPLACE_DEADLINE_MINUTES", ge=1)
    # The template parameter DeepHealthCheckMinutes: added to the replace and HyperPod repair deadlines
    # of a node whose instance group runs OnStartDeepHealthChecks (AWS: "about 2 hours" per new instance).
    deep_health_check_minutes: int = Field(alias="DEEP_HEALTH_CHECK_MINUTES", ge=0)
    # "true" | "false", as the template parameter AllowLoginReplace spells it
    allow_login_replace: bool = Field(alias="ALLOW_LOGIN_REPLACE")
    # How long a Slurm-aware repair waits for the drained node's jobs to end (part of its deadlines).
    drain_timeout_minutes: int = Field(alias="DRAIN_TIMEOUT_MINUTES", ge=0)


healing_settings = from_environment(HealingSettings)
