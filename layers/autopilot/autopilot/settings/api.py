"""ApiFunction's settings (autopilot.settings): what it reads from its environment."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field

from autopilot.models.cost_allocation import CostTagKeys
from autopilot.settings.base import (
    AGENT_POLL_LIMIT,
    AccountArn,
    CommaList,
    CostTagKeysSetting,
    FunctionSettings,
    Switch,
    from_environment,
)


class ApiSettings(FunctionSettings):
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


api_settings = from_environment(ApiSettings)
