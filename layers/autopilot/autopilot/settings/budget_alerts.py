"""BudgetAlertsFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from pydantic import Field

from autopilot.settings.base import (
    AccountArn,
    FunctionSettings,
    from_environment,
)


class BudgetAlertsSettings(FunctionSettings):
    """What BudgetAlertsFunction needs (env var names are the aliases)."""

    reader = "BudgetAlertsFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: AccountArn = Field(alias="ALERTS_TOPIC_ARN")
    # The REST API's base URL (the stack's ApiUrl output): an alert links the cluster's resource.
    api_url: str = Field(alias="API_URL", min_length=1)

    @property
    def account(self) -> str:
        """The stack's account (DescribeBudget's AccountId), read off the alerts topic's ARN."""
        return self.alerts_topic_arn.split(":")[4]


budget_alerts_settings = from_environment(BudgetAlertsSettings)
