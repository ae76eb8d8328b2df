"""Environment configuration as pydantic models, validated on first use.

Each function reads only the settings it needs; a missing or malformed variable fails loudly with
the variable's name (no silent defaults). A value the template spells as text (a comma-separated list,
CostTagKeys, Enabled/Disabled) is parsed here, once, into the type its readers use: a use case reads a
tuple, a CostTagKeys or a bool, never the text again. Every model is built on its first use (``defer_build``):
a function builds its own one or two (~1 ms each) when it first reads them, not all ten at import.
Tests set the environment (from template.yaml) and call ``cache_clear()`` on the loader.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Annotated, ClassVar, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from autopilot.models.cost_allocation import CostTagKeys, parse_cost_tag_keys


class SettingsError(RuntimeError):
    """A required environment variable is missing or malformed."""


def _comma_separated(value: object) -> object:
    """``"a, b,,c"`` as a template parameter spells a list -> ``("a", "b", "c")`` (a list given as one
    already, by a test, is left to the field's type)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _cost_tag_keys(value: object) -> object:
    # A malformed CostTagKeys fails the settings (ValueError), naming the variable.
    return parse_cost_tag_keys(value) if isinstance(value, str) else value


def _enabled(value: object) -> object:
    """The template's ``Enabled`` / ``Disabled`` switches -> True / False; anything else is an error."""
    if value in ("Enabled", "Disabled"):
        return value == "Enabled"
    if isinstance(value, bool):
        return value
    raise ValueError("must be Enabled or Disabled")


# Comma-separated text (ARNs, names, patterns, types) -> its entries, blanks dropped.
CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_separated)]
# CostTagKeys text (owner=Owner,project=Project,...) -> the keys.
CostTagKeysSetting = Annotated[CostTagKeys, BeforeValidator(_cost_tag_keys)]
# Enabled | Disabled -> bool.
Switch = Annotated[bool, BeforeValidator(_enabled)]
# An ARN that names its account (arn:partition:service:region:account:resource): an ``account`` read
# off it is then always there, a malformed one fails the settings naming the variable.
AccountArn = Annotated[str, Field(pattern=r"^arn:[a-z0-9-]+:[a-z0-9-]+:[a-z0-9-]*:\d{12}:.+")]

# AgentPollSeconds: template.yaml bounds it at 300 for a deployment; the sandbox deploys its real-Slurm
# stacks with more (its agents poll every half wall second, thousands of its simulated seconds), so the
# functions take up to an hour (docs/sandbox.md, "Real Slurm").
AGENT_POLL_LIMIT = 3600


class _Settings(BaseModel):
    """One function's settings: env var names are the fields' aliases, other variables ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    # Who reads them, for the error message.
    reader: ClassVar[str]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Self:
        """The settings in ``environ``; SettingsError naming every missing or malformed variable."""
        try:
            return cls.model_validate(dict(environ))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise SettingsError(f"invalid {cls.reader} environment: {problems}") from exc


def _from_environment[T: _Settings](model: type[T]) -> Callable[[], T]:
    """The loader a function calls: ``model`` read from ``os.environ`` once (tests ``cache_clear()``)."""

    @lru_cache(maxsize=1)
    def settings() -> T:
        return model.from_environ(os.environ)

    return settings


class ApiSettings(_Settings):
    """What the API function needs (env var names are the aliases)."""

    reader = "API function"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    create_cluster_state_machine_arn: AccountArn = Field(alias="CREATE_CLUSTER_STATE_MACHINE_ARN")
    cleanup_cluster_state_machine_arn: str = Field(alias="CLEANUP_CLUSTER_STATE_MACHINE_ARN", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The budgets' SNS subscriber: AWS Budgets notifies BudgetAlertsFunction through it.
    budget_notifications_topic_arn: str = Field(alias="BUDGET_NOTIFICATIONS_TOPIC_ARN", min_length=1)
    idempotency_table_name: str = Field(alias="IDEMPOTENCY_TABLE_NAME", min_length=1)
    # The stack's region (Lambda sets AWS_REGION): the API validates as `autopilot validate --region` it.
    region: str = Field(alias="AWS_REGION", min_length=1)
    # The template parameters ExecutionRoleNamePatterns (at least one) and AdminPrincipalArns (may be none).
    execution_role_name_patterns: CommaList = Field(alias="EXECUTION_ROLE_NAME_PATTERNS", min_length=1)
    admin_principal_arns: CommaList = Field(alias="ADMIN_PRINCIPAL_ARNS")
    # The template parameter OwnerMatching: whether a plain role session is held to its session name
    # ("session") or is its role ("role"), when Autopilot decides ownership (logic/callers.py).
    owner_matching: Literal["role", "session"] = Field(alias="OWNER_MATCHING", default="role")
    # The template parameter ReadAccess: who reads a managed cluster (logic/read_access.py).
    read_access: Literal["all", "owners"] = Field(alias="READ_ACCESS", default="all")
    # Autopilot's own stack, which DELETE /clusters/{name}?stackName= must never delete.
    stack_name: str = Field(alias="AUTOPILOT_STACK_NAME", min_length=1)
    # The template parameters CostTagKeys and DefaultMonthlyBudgetUsd (the template always sets both;
    # the defaults are the template's, for environments written before they existed).
    cost_tag_keys: CostTagKeysSetting = Field(alias="COST_TAG_KEYS", default_factory=CostTagKeys)
    default_monthly_budget_usd: Decimal = Field(alias="DEFAULT_MONTHLY_BUDGET_USD", default=Decimal(0), ge=0)
    # The template parameter PreflightChecks: Enabled adds validate --aws's checks to the API's validation.
    preflight_checks: Switch = Field(alias="PREFLIGHT_CHECKS", default=False)
    # The template parameters MaxInstancesPerCluster and AllowedInstanceTypes (comma-separated; empty:
    # every type): the request-time cost guardrail (autopilot_config.validation.caps).
    max_instances_per_cluster: int = Field(alias="MAX_INSTANCES_PER_CLUSTER", default=2000, ge=1)
    allowed_instance_types: CommaList = Field(alias="ALLOWED_INSTANCE_TYPES", default=())
    # The template parameter AgentPollSeconds: GET /clusters/{name} judges the Slurm agent silent after
    # max(60, 3 x it) seconds without a report (autopilot.logic.agent.status).
    agent_poll_seconds: int = Field(alias="AGENT_POLL_SECONDS", default=10, ge=1, le=AGENT_POLL_LIMIT)
    # The template parameter CallerResourceChecks (autopilot.caller_resources): the caller's
    # own iam:PassRole on each role, the lifecycle buckets and the network this account's. The template
    # always sets it (Enabled by default); an environment built by hand (a test's fakes) has no IAM to ask.
    caller_resource_checks: Switch = Field(alias="CALLER_RESOURCE_CHECKS", default=False)
    # The template parameter EksClusterNames (comma-separated names or patterns; empty: no EKS
    # orchestrator): the EKS clusters a create may name (autopilot_config.validation.eks_clusters).
    eks_cluster_names: CommaList = Field(alias="EKS_CLUSTER_NAMES", default=())

    @property
    def account(self) -> str:
        """The stack's account, read off its own state machine's ARN (no STS call on a cold start)."""
        return self.create_cluster_state_machine_arn.split(":")[4]


class LoginTargetsSettings(_Settings):
    """What LoginTargetsFunction needs (env var names are the aliases)."""

    reader = "LoginTargetsFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


class RecordOutcomeSettings(_Settings):
    """What RecordOutcomeFunction needs (env var names are the aliases)."""

    reader = "RecordOutcomeFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


class ReconcilerSettings(_Settings):
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


class ClusterEventsSettings(_Settings):
    """What ClusterEventsFunction needs (env var names are the aliases)."""

    reader = "ClusterEventsFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)


class CostTaggerSettings(_Settings):
    """What CostTaggerFunction needs (env var names are the aliases)."""

    reader = "CostTaggerFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameter CostTagKeys (autopilot.models.cost_allocation.parse_cost_tag_keys).
    cost_tag_keys: CostTagKeysSetting = Field(alias="COST_TAG_KEYS")


class SessionGuardSettings(_Settings):
    """What SessionGuardFunction needs (env var names are the aliases)."""

    reader = "SessionGuardFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The template parameter MaxSessionsPerUser: Active sessions a principal may hold on one cluster.
    max_sessions_per_user: int = Field(alias="MAX_SESSIONS_PER_USER", ge=1)
    # The template parameter ForbiddenRunAsUsers, comma-separated ("" forbids none).
    forbidden_run_as: Annotated[frozenset[str], BeforeValidator(_comma_separated)] = Field(
        alias="FORBIDDEN_RUN_AS_USERS"
    )
    # The template parameter OwnerMatching: a plain role session is its role ("role") or itself
    # ("session") when sessions are counted per person (logic/callers.py, as the API's ownership).
    owner_matching: Literal["role", "session"] = Field(alias="OWNER_MATCHING", default="role")


class HealingSettings(_Settings):
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


class SpendMeterSettings(_Settings):
    """What SpendMeterFunction needs (env var names are the aliases)."""

    reader = "SpendMeterFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    # The stack's region (Lambda sets AWS_REGION): its clusters' nodes are priced at its list prices.
    region: str = Field(alias="AWS_REGION", min_length=1)


class BudgetAlertsSettings(_Settings):
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


class HealingSweepSettings(_Settings):
    """What the healing sweep (HealingSweepFunction) needs beside HealingSettings; env var names are the
    aliases."""

    reader = "healing sweep"

    # The template parameter StuckNodeMinutes: a node not Running for this long is repaired.
    stuck_node_minutes: int = Field(alias="STUCK_NODE_MINUTES", ge=1)
    # The template parameter AgentPollSeconds: a Slurm agent silent past max(60, 3 x it) is not trusted
    # for the sweep's Slurm signals (logic/agent/status.py).
    agent_poll_seconds: int = Field(alias="AGENT_POLL_SECONDS", ge=1, le=AGENT_POLL_LIMIT)
    # The redrive of dead-lettered cluster events (logic/redrive_events.py): from the one into the other.
    cluster_events_dead_letter_queue_arn: str = Field(
        alias="CLUSTER_EVENTS_DEAD_LETTER_QUEUE_ARN", min_length=1
    )
    cluster_events_queue_arn: str = Field(alias="CLUSTER_EVENTS_QUEUE_ARN", min_length=1)


class AgentSettings(_Settings):
    """What AgentFunction needs (env var names are the aliases)."""

    reader = "AgentFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameter AgentPollSeconds: how often the agent reports (the response tells it).
    poll_seconds: int = Field(alias="AGENT_POLL_SECONDS", ge=1, le=AGENT_POLL_LIMIT)
    # Chargeback: department budget alerts go to the alerts topic; the report's finished jobs are
    # priced at the stack region's list prices (Lambda sets AWS_REGION).
    alerts_topic_arn: str = Field(alias="ALERTS_TOPIC_ARN", min_length=1)
    region: str = Field(alias="AWS_REGION", min_length=1)


class UsageExportSettings(_Settings):
    """What UsageExportFunction needs (env var names are the aliases)."""

    reader = "UsageExportFunction"

    state_table_name: str = Field(alias="STATE_TABLE_NAME", min_length=1)
    # The template parameters UsageExportBucket (empty: no export) and UsageExportPrefix.
    bucket: str = Field(alias="USAGE_EXPORT_BUCKET")
    prefix: str = Field(alias="USAGE_EXPORT_PREFIX")


# The loaders the functions call.
agent_settings = _from_environment(AgentSettings)
api_settings = _from_environment(ApiSettings)
budget_alerts_settings = _from_environment(BudgetAlertsSettings)
cluster_events_settings = _from_environment(ClusterEventsSettings)
cost_tagger_settings = _from_environment(CostTaggerSettings)
healing_settings = _from_environment(HealingSettings)
healing_sweep_settings = _from_environment(HealingSweepSettings)
reconciler_settings = _from_environment(ReconcilerSettings)
record_outcome_settings = _from_environment(RecordOutcomeSettings)
usage_export_settings = _from_environment(UsageExportSettings)
login_targets_settings = _from_environment(LoginTargetsSettings)
session_guard_settings = _from_environment(SessionGuardSettings)
spend_meter_settings = _from_environment(SpendMeterSettings)
