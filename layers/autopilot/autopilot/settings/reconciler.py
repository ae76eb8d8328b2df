"""ReconcilerFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    FunctionSettings,
    from_environment,
)


class ReconcilerSettings(FunctionSettings):
    """What ReconcilerFunction needs (env var names are the aliases)."""

    reader = "ReconcilerFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # An operation's execution is named after it: these ARNs find the execution the API stored no ARN of.
    create_cluster_state_machine_arn: str = Field(alias="CREATE_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    cleanup_cluster_state_machine_arn: str = Field(alias="CLEANUP_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    replace_node_state_machine_arn: str = Field(alias="REPLACE_NODE_STATE_MACHINE_ARN", min_length=1)
    # How long after being recorded an operation may still be without an execution (StartExecution
    # follows the record within the same API call).
    grace_seconds: int = Field(alias="RECONCILE_GRACE_SECONDS", ge=1)


reconciler_settings = from_environment(ReconcilerSettings)
