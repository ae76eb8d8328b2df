"""Environment configuration as pydantic models, validated on first use.

Each function reads only the settings it needs; a missing or malformed variable fails loudly with
the variable's name (no silent defaults). Every model is built on its first use (``defer_build``):
a function builds its own one or two (~1 ms each) when it first reads them, not all ten at import.
Tests set the environment (from template.yaml) and call ``cache_clear()`` on the loader.
"""

from __future__ import annotations

import os
from decimal import Decimal
from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from autopilot.models.cost_allocation import parse_cost_tag_keys


class SettingsError(RuntimeError):
    """A required environment variable is missing or malformed."""


def _cost_tag_keys(value: str) -> str:
    parse_cost_tag_keys(value)  # a malformed CostTagKeys fails the settings, naming the variable
    return value


CostTagKeysText = Annotated[str, AfterValidator(_cost_tag_keys)]


class ApiSettings(BaseModel):
    """What the API function needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    create_cluster_state_machine_arn: str = Field(alias="CREATE_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    cleanup_cluster_state_machine_arn: str = Field(alias="CLEANUP_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The budgets' SNS subscriber: AWS Budgets notifies BudgetAlertsFunction through it.
    budget_notifications_topic_arn: str = Field(alias="BUDGET_NOTIFICATIONS_TOPIC_ARN", min_length=1)
    idempotency_table_name: str = Field(alias="IDEMPOTENCY_TABLE_NAME", min_length=1)
    # The stack's region (Lambda sets AWS_REGION): the API validates as `autopilot validate --region` it.
    region: str = Field(alias="AWS_REGION", min_length=1)
    # Comma-separated, as the template parameters ExecutionRoleNamePatterns / AdminPrincipalArns spell them.
    execution_role_name_patterns: str = Field(alias="EXECUTION_ROLE_NAME_PATTERNS", min_length=1)
    admin_principal_arns: str = Field(alias="ADMIN_PRINCIPAL_ARNS")
    # Autopilot's own stack, which DELETE /clusters/{name}?stackName= must never delete.
    stack_name: str = Field(alias="AUTOPILOT_STACK_NAME", min_length=1)
    # The template parameters CostTagKeys and DefaultMonthlyBudgetUsd (the template always sets both;
    # the defaults are the template's, for environments written before they existed).
    cost_tag_keys: CostTagKeysText = Field(alias="COST_TAG_KEYS", default="")
    default_monthly_budget_usd: Decimal = Field(alias="DEFAULT_MONTHLY_BUDGET_USD", default=Decimal(0), ge=0)

    @property
    def account(self) -> str:
        """The stack's account, read off its own state machine's ARN (no STS call on a cold start)."""
        return self.create_cluster_state_machine_arn.split(":")[4]


class RecordOutcomeSettings(BaseModel):
    """What RecordOutcomeFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


class ReconcilerSettings(BaseModel):
    """What ReconcilerFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # An operation's execution is named after it: these ARNs find the execution the API stored no ARN of.
    create_cluster_state_machine_arn: str = Field(alias="CREATE_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    cleanup_cluster_state_machine_arn: str = Field(alias="CLEANUP_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    replace_node_state_machine_arn: str = Field(alias="REPLACE_NODE_STATE_MACHINE_ARN", min_length=1)
    # How long after being recorded an operation may still be without an execution (StartExecution
    # follows the record within the same API call).
    grace_seconds: int = Field(alias="RECONCILE_GRACE_SECONDS", ge=1)


class ClusterEventsSettings(BaseModel):
    """What ClusterEventsFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


def _load[T: BaseModel](model: type[T], environ: dict[str, str], what: str) -> T:
    try:
        return model.model_validate(environ)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise SettingsError(f"invalid {what} environment: {problems}") from exc


def load_api_settings_from(environ: dict[str, str]) -> ApiSettings:
    return _load(ApiSettings, environ, "API function")


def load_record_outcome_settings_from(environ: dict[str, str]) -> RecordOutcomeSettings:
    return _load(RecordOutcomeSettings, environ, "RecordOutcomeFunction")


def load_reconciler_settings_from(environ: dict[str, str]) -> ReconcilerSettings:
    return _load(ReconcilerSettings, environ, "ReconcilerFunction")


def load_cluster_events_settings_from(environ: dict[str, str]) -> ClusterEventsSettings:
    return _load(ClusterEventsSettings, environ, "ClusterEventsFunction")


@lru_cache(maxsize=1)
def api_settings() -> ApiSettings:
    """The API function's settings, read from the environment once."""
    return load_api_settings_from(dict(os.environ))


@lru_cache(maxsize=1)
def record_outcome_settings() -> RecordOutcomeSettings:
    return load_record_outcome_settings_from(dict(os.environ))


@lru_cache(maxsize=1)
def reconciler_settings() -> ReconcilerSettings:
    return load_reconciler_settings_from(dict(os.environ))


@lru_cache(maxsize=1)
def cluster_events_settings() -> ClusterEventsSettings:
    return load_cluster_events_settings_from(dict(os.environ))


class CostTaggerSettings(BaseModel):
    """What CostTaggerFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameter CostTagKeys (autopilot.models.cost_allocation.parse_cost_tag_keys).
    cost_tag_keys: CostTagKeysText = Field(alias="COST_TAG_KEYS")


def load_cost_tagger_settings_from(environ: dict[str, str]) -> CostTaggerSettings:
    return _load(CostTaggerSettings, environ, "CostTaggerFunction")


@lru_cache(maxsize=1)
def cost_tagger_settings() -> CostTaggerSettings:
    return load_cost_tagger_settings_from(dict(os.environ))


class SessionGuardSettings(BaseModel):
    """What SessionGuardFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The template parameter MaxSessionsPerUser: Active sessions a principal may hold on one cluster.
    max_sessions_per_user: int = Field(alias="MAX_SESSIONS_PER_USER", ge=1)
    # The template parameter ForbiddenRunAsUsers, comma-separated ("" forbids none).
    forbidden_run_as_users: str = Field(alias="FORBIDDEN_RUN_AS_USERS")

    @property
    def forbidden_run_as(self) -> frozenset[str]:
        return frozenset(user.strip() for user in self.forbidden_run_as_users.split(",") if user.strip())


def load_session_guard_settings_from(environ: dict[str, str]) -> SessionGuardSettings:
    return _load(SessionGuardSettings, environ, "SessionGuardFunction")


@lru_cache(maxsize=1)
def session_guard_settings() -> SessionGuardSettings:
    return load_session_guard_settings_from(dict(os.environ))


class HealingSettings(BaseModel):
    """How repairs start and are bounded: the healing template parameters (docs/operations.md,
    "Healing policy"), for every function that starts or shows repairs (env var names are the aliases).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    replace_node_state_machine_arn: str = Field(alias="REPLACE_NODE_STATE_MACHINE_ARN", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    max_concurrent_repairs: int = Field(alias="MAX_CONCURRENT_REPAIRS", ge=1)
    max_unhealthy_percent: int = Field(alias="MAX_UNHEALTHY_PERCENT", ge=1, le=100)
    breaker_window_minutes: int = Field(alias="BREAKER_WINDOW_MINUTES", ge=1)
    reboot_deadline_minutes: int = Field(alias="REBOOT_DEADLINE_MINUTES", ge=1)
    hyperpod_repair_deadline_minutes: int = Field(alias="HYPERPOD_REPAIR_DEADLINE_MINUTES", ge=1)
    replace_deadline_minutes: int = Field(alias="REPLACE_DEADLINE_MINUTES", ge=1)
    # "true" | "false", as the template parameter AllowLoginReplace spells it
    allow_login_replace: bool = Field(alias="ALLOW_LOGIN_REPLACE")


def load_healing_settings_from(environ: dict[str, str]) -> HealingSettings:
    return _load(HealingSettings, environ, "healing")


@lru_cache(maxsize=1)
def healing_settings() -> HealingSettings:
    return load_healing_settings_from(dict(os.environ))


class SpendMeterSettings(BaseModel):
    """What SpendMeterFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The stack's region (Lambda sets AWS_REGION): its clusters' nodes are priced at its list prices.
    region: str = Field(alias="AWS_REGION", min_length=1)


def load_spend_meter_settings_from(environ: dict[str, str]) -> SpendMeterSettings:
    return _load(SpendMeterSettings, environ, "SpendMeterFunction")


@lru_cache(maxsize=1)
def spend_meter_settings() -> SpendMeterSettings:
    return load_spend_meter_settings_from(dict(os.environ))


class BudgetAlertsSettings(BaseModel):
    """What BudgetAlertsFunction needs (env var names are the aliases)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The REST API's base URL (the stack's ApiUrl output): an alert links the cluster's resource.
    api_url: str = Field(alias="API_URL", min_length=1)

    @property
    def account(self) -> str:
        """The stack's account (DescribeBudget's AccountId), read off the alerts topic's ARN."""
        return self.alerts_topic_arn.split(":")[4]


def load_budget_alerts_settings_from(environ: dict[str, str]) -> BudgetAlertsSettings:
    return _load(BudgetAlertsSettings, environ, "BudgetAlertsFunction")


@lru_cache(maxsize=1)
def budget_alerts_settings() -> BudgetAlertsSettings:
    return load_budget_alerts_settings_from(dict(os.environ))


class HealingSweepSettings(BaseModel):
    """What the healing sweep (HealingSweepFunction) needs beside HealingSettings; env var names are the
    aliases."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    # The template parameter StuckNodeMinutes: a node not Running for this long is repaired.
    stuck_node_minutes: int = Field(alias="STUCK_NODE_MINUTES", ge=1)


def load_healing_sweep_settings_from(environ: dict[str, str]) -> HealingSweepSettings:
    return _load(HealingSweepSettings, environ, "healing sweep")


@lru_cache(maxsize=1)
def healing_sweep_settings() -> HealingSweepSettings:
    return load_healing_sweep_settings_from(dict(os.environ))
