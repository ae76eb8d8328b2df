"""Request and response bodies of the REST API (camelCase on the wire; AWS shapes keep AWS spelling).

Models, not HTTP: the use cases in logic/ take and return them, the routers in api/ serve them (status codes,
body limits and the OpenAPI document stay in api/). Here rather than in api/ so that logic/ imports
nothing from the layer above it (tests/unit/test_import_cycles.py).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from autopilot_config.models.constraints import is_tag_text
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from autopilot.models.error_body import ErrorDetail
from autopilot.models.records import (
    ClusterStatus,
    Diagnosis,
    Fault,
    HistoryEntry,
    NodeAction,
    NodeHealth,
    OperationStatus,
    OperationType,
    RepairAction,
    RepairActor,
    RepairTrigger,
    Step,
    Time,
)
from autopilot.models.values import (
    MAX_ACCOUNT_BUDGETS,
    AccountBudgetMap,
    AgentState,
    BudgetEnforcement,
    check_account_budgets,
)

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _tag_value(value: str) -> str:
    if not is_tag_text(value):
        raise ValueError(
            "may contain only letters, digits, spaces and _ . : / = + - @ (it becomes a cost tag)"
        )
    return value


def _email(value: str) -> str:
    if not _EMAIL.fullmatch(value):
        raise ValueError("must be an e-mail address")
    return value


TagValue = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_tag_value)]
Email = Annotated[str, Field(max_length=254), AfterValidator(_email)]
# An identity that may own a cluster: an IAM user or role (a path allowed), or a role session.
PrincipalArn = Annotated[
    str,
    Field(
        max_length=2048,
        pattern=r"^arn:aws[a-z-]*:(iam::\d{12}:(user|role)/[\w+=,.@/-]+|sts::\d{12}:assumed-role/[\w+=,.@-]+/[\w+=,.@-]+)$",
    ),
]


# The request bodies' examples in the OpenAPI document (API fuzzers start from them): a small Slurm
# cluster as the HyperPod workshops configure it.
_GROUP = {
    "InstanceType": "ml.m5.xlarge",
    "InstanceCount": 1,
    "LifeCycleConfig": {
        "SourceS3Uri": "s3://sagemaker-lifecycle-123456789012/src/",
        "OnCreate": "on_create.sh",
    },
    "ExecutionRole": "arn:aws:iam::123456789012:role/sagemaker-hyperpod-execution-role",
    "ThreadsPerCore": 1,
}
CLUSTER_CONFIG_EXAMPLE: dict[str, Any] = {
    "ClusterName": "ml-cluster",
    "InstanceGroups": [
        {"InstanceGroupName": "controller-machine", **_GROUP},
        {"InstanceGroupName": "worker-group-1", **_GROUP, "InstanceCount": 2},
    ],
    "VpcConfig": {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    "NodeRecovery": "Automatic",
}
PROVISIONING_PARAMETERS_EXAMPLE: dict[str, Any] = {
    "version": "1.0.0",
    "workload_manager": "slurm",
    "controller_group": "controller-machine",
    "worker_groups": [{"instance_group_name": "worker-group-1", "partition_name": "dev"}],
}


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class BudgetRequest(ApiModel):
    """A monthly COST budget on the ClusterName tag (and optionally one on the project tag), alerting at
    50/80/100 % (and forecast 100 %)."""

    monthly_limit_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000_000,
        description="Monthly limit in USD (absent: the stack's DefaultMonthlyBudgetUsd, if any).",
    )
    alert_emails: list[Email] = Field(
        default_factory=list, max_length=10, description="E-mail subscribers (AWS allows 10)."
    )
    project_monthly_limit_usd: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000_000,
        description="A monthly budget shared by the project's clusters, created if the project has none "
        "yet; removed when the project's last cluster is deleted.",
    )
    enforcement: BudgetEnforcement = Field(
        default=BudgetEnforcement.ALERT,
        description="At 100 % of the cluster's budget (ACTUAL): `alert` only; `scale-to-min` also scales "
        "the worker groups to their minimum (MinInstanceCount, else 0; controller and login groups "
        "untouched); `block-growth` also refuses scale-ups until the next budget period or an admin "
        "lifts it (DELETE /clusters/{name}/growth-block).",
    )


class CreateClusterBody(ApiModel):
    """POST /clusters."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "clusterConfig": CLUSTER_CONFIG_EXAMPLE,
                    "provisioningParameters": PROVISIONING_PARAMETERS_EXAMPLE,
                    "owner": "ann",
                    "project": "llm-pretraining",
                    "budget": {"monthlyLimitUsd": 2500, "alertEmails": ["ann@example.com"]},
                }
            ]
        }
    )

    cluster_config: dict[str, Any] = Field(
        description="The SageMaker CreateCluster request, as in cluster-config.json."
    )
    provisioning_parameters: dict[str, Any] | None = Field(
        default=None,
        description="provisioning-parameters.json (Slurm lifecycle scripts), checked against it.",
    )
    owner: TagValue = Field(description="Who the cluster is for (the `owner` cost tag).")
    project: TagValue = Field(description="What it is for (the `project` cost tag).")
    cost_center: TagValue | None = Field(default=None, description="Who pays (the `cost-center` cost tag).")
    owners: list[PrincipalArn] | None = Field(
        default=None,
        max_length=20,
        description="Who else may act on the cluster as its creator may (delete, repair, pause, scale): IAM "
        "user or role ARNs (a role: every session of it) or session ARNs (an IAM Identity Center user: "
        "`arn:aws:sts::<account>:assumed-role/AWSReservedSSO_<PermissionSet>_<hex>/<user>`).",
    )
    budget: BudgetRequest | None = Field(default=None, description="Create an AWS Budget for the cluster.")
    login_target_group_arns: list[str] | None = Field(
        default=None,
        max_length=5,
        description="ELBv2 target groups (target type `ip`, this account and region) that hold the login "
        "group's node IPs: registered once the cluster is InService on the port each group uses, kept "
        "true on every replacement, scale and delete of a login node (docs/operations.md).",
    )
    account_budgets: AccountBudgetMap | None = Field(
        default=None,
        max_length=MAX_ACCOUNT_BUDGETS,
        description="Department budgets: USD a month per Slurm account of the cluster. Crossing 50/80/100 % "
        "of one in a month (its jobs at list prices, as `GET /clusters/{name}/usage` counts them) publishes "
        "one alert per threshold on the alerts topic. `PUT /clusters/{name}/account-budgets` replaces them.",
    )
    rollback_on_failure: bool = Field(
        default=False, description="Delete the cluster if creation fails after SageMaker accepted it."
    )

    @field_validator("account_budgets")
    @classmethod
    def _account_budgets(cls, budgets: AccountBudgetMap | None) -> AccountBudgetMap | None:
        return check_account_budgets(budgets)


class ValidateBody(ApiModel):
    """POST /validate."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "clusterConfig": CLUSTER_CONFIG_EXAMPLE,
                    "provisioningParameters": PROVISIONING_PARAMETERS_EXAMPLE,
                }
            ]
        }
    )

    cluster_config: dict[str, Any]
    provisioning_parameters: dict[str, Any] | None = None


class OperationAccepted(ApiModel):
    operation_id: str
    cluster_name: str
    status: OperationStatus
    warnings: list[ErrorDetail] = Field(default_factory=list)


class CreateClusterPlan(ApiModel):
    """POST /clusters?dryRun=true: what the create would do; nothing was created."""

    cluster_name: str
    create_cluster_request: dict[str, Any] = Field(
        description="The CreateCluster request SageMaker would get, Autopilot's cost tags included "
        "(`autopilot:operation-id` is assigned by the create)."
    )
    cost_tags: list[dict[str, str]] = Field(description="The tags Autopilot puts on everything it creates.")
    budget: dict[str, Any] | None = Field(description="The cluster's AWS Budget, if one would be created.")
    project_budget: dict[str, Any] | None = Field(
        description="The project's shared budget, if asked for (created unless the project has one)."
    )
    checks: list[str] = Field(description="The checks made, all passed (a failed one is a 4xx).")
    warnings: list[ErrorDetail]


class ValidationResult(ApiModel):
    valid: bool
    errors: list[ErrorDetail]
    warnings: list[ErrorDetail]


class OperationErrorView(ApiModel):
    error: str
    cause: str


class OperationView(ApiModel):
    operation_id: str
    kind: OperationType
    cluster_name: str
    status: OperationStatus
    created_at: Time
    updated_at: Time
    requested_by: str | None = None
    execution_arn: str | None = None
    steps: list[Step]
    error: OperationErrorView | None = None
    leftovers: list[str] | None = None
    cluster_arn: str | None = None
    rolled_back: bool | None = None
    # What went wrong without failing the operation (e.g. cost tags not applied after InService).
    warnings: list[str] | None = None
    # A failed create: the cause read from HyperPod's lifecycle logs (docs/operations.md).
    diagnosis: Diagnosis | None = None
    # ReplaceNode: the node, what started the repair, the fault, who repairs, each action and its result,
    # and the instance a replace brought.
    node_id: str | None = None
    trigger: RepairTrigger | None = None
    fault: Fault | None = None
    actor: RepairActor | None = None
    actions: list[RepairAction] | None = None
    successor_node_id: str | None = None


class OperationList(ApiModel):
    operations: list[OperationView] = Field(description="Newest first.")
    next_token: str | None = None


class InstanceGroupView(BaseModel):
    """A DescribeCluster InstanceGroups entry (AWS spelling)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    InstanceGroupName: str
    InstanceType: str | None = None
    CurrentCount: int | None = None
    TargetCount: int | None = None
    Status: str | None = None


class LiveClusterView(BaseModel):
    """What DescribeCluster says right now (AWS spelling)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    ClusterArn: str
    ClusterStatus: str
    CreationTime: Time | None = None
    FailureMessage: str | None = None
    NodeRecovery: str | None = None
    InstanceGroups: list[InstanceGroupView] = Field(default_factory=list)


class ClusterSummary(ApiModel):
    cluster_name: str
    status: ClusterStatus
    owner: str | None = None
    project: str | None = None
    cluster_arn: str | None = None
    budget_name: str | None = None
    sagemaker_status: str | None = Field(default=None, description="SageMaker's ClusterStatus, last seen")
    created_by: str | None = Field(
        default=None, description="The IAM identity that created it through the API (it may delete it)"
    )
    owners: list[str] | None = Field(
        default=None, description="The identities its creator named who may act on it as the creator may"
    )
    last_operation_id: str
    created_at: Time
    updated_at: Time


class GrowthBlockLifted(ApiModel):
    """DELETE /clusters/{name}/growth-block."""

    cluster_name: str
    growth_blocked: bool
    was_blocked: bool = Field(description="Whether a block-growth was in force until now.")


class ScaleInstanceGroupBody(ApiModel):
    """PUT /clusters/{name}/instance-groups/{group}."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"instanceCount": 4}]}, defer_build=True)

    instance_count: StrictInt = Field(
        # SageMaker's ClusterInstanceGroupSpecification.InstanceCount range (botocore's model).
        ge=0,
        le=6758,
        description="The group's new instance count (0 stops every node).",
    )


class InstanceGroupScaled(ApiModel):
    """PUT /clusters/{name}/instance-groups/{group}: what UpdateCluster was asked."""

    cluster_name: str
    instance_group: str
    previous_count: int = Field(description="The group's target count before this request.")
    instance_count: int
    operation_id: str | None = Field(
        default=None,
        description="The ScaleInstanceGroup operation in the cluster's history; null when the count was "
        "already this (nothing asked of SageMaker).",
    )
    target_counts: dict[str, int] = Field(
        description="Every instance group's target count, this group's as asked (SageMaker resizes it "
        "asynchronously: follow GET /clusters/{name})."
    )


class ClusterList(ApiModel):
    clusters: list[ClusterSummary]
    next_token: str | None = None


class AgentView(ApiModel):
    status: AgentState = Field(
        description="The Slurm agent on the cluster's controller (docs/agent.md): connected (a report "
        "within max(60, 3 x AgentPollSeconds) seconds), silent (reported once, not lately) or absent "
        "(never). Repairs wait on Slurm only while it is connected."
    )
    last_seen: Time | None = Field(
        default=None, description="When its latest report was accepted (ISO 8601)."
    )
    # The agent record's agentVersion: validated from the record (logic/read_clusters.py).
    version: str | None = Field(
        default=None, validation_alias="agent_version", description="The agent's version, as it reported it."
    )


class ClusterView(ApiModel):
    cluster_name: str
    status: ClusterStatus | None = Field(
        description="Autopilot's record; null for a cluster Autopilot did not create."
    )
    owner: str | None = None
    project: str | None = None
    created_by: str | None = Field(
        default=None, description="The IAM identity that created it through the API"
    )
    owners: list[str] | None = Field(
        default=None, description="The identities its creator named who may act on it as the creator may"
    )
    budget_name: str | None = None
    budget_enforcement: BudgetEnforcement | None = Field(
        default=None,
        description="What happens at 100 % of the budget (ACTUAL): alert | scale-to-min | block-growth.",
    )
    growth_blocked: bool = Field(
        default=False,
        description="block-growth is in force: scale-ups of this cluster are refused (409) until "
        "`growthBlockedUntil` or an admin's DELETE /clusters/{name}/growth-block.",
    )
    growth_blocked_until: Time | None = None
    account_budgets: dict[str, float] | None = Field(
        default=None,
        description="Department budgets: USD a month per Slurm account (PUT .../account-budgets).",
    )
    last_operation_id: str | None = None
    sagemaker: LiveClusterView | None = Field(
        description="Live DescribeCluster; null when SageMaker has no such cluster."
    )
    agent: AgentView = Field(
        default_factory=lambda: AgentView(status="absent"), description="The cluster's Slurm agent."
    )
    history: list[HistoryEntry] = Field(default_factory=list)


class InstanceStatusView(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    Status: str
    Message: str | None = None


class NodeHealthView(ApiModel):
    # Validated from the node record (logic/read_nodes.py): each field names the record's field it is.
    status: NodeHealth = Field(validation_alias="health")
    reason: str | None = Field(
        default=None, validation_alias="health_reason", description="HyperPod's HealthStatusReason."
    )
    since: Time | None = Field(
        default=None,
        validation_alias="health_since",
        description="The time of the health report held (ISO 8601).",
    )


class NodeRepairView(ApiModel):
    operation_id: str
    action: NodeAction | None = Field(
        default=None, description="The repair's latest action (null until the workflow took one)."
    )
    status: OperationStatus


class SlurmNodeView(ApiModel):
    state: str = Field(description='Slurm\'s State= (base state, then +FLAGS: "IDLE", "MIXED+DRAIN", ...).')
    reason: str = Field(description='Slurm\'s Reason= ("" when none).')
    jobs: list[str] = Field(description="The ids of the jobs on the node (any state but pending).")
    gpus: int = Field(description="The node's configured GPU (gres) count.")


class TargetHealthView(ApiModel):
    target_group_arn: str
    port: int = Field(description="The port the node is registered on (the target group's).")
    state: str = Field(
        description="DescribeTargetHealth's State: initial | healthy | unhealthy | unused | draining | "
        "unavailable; `unregistered` when the node is not a target of the group (the sweep registers it)."
    )


class NodeView(BaseModel):
    """A ListClusterNodes ClusterNodeSummaries entry (AWS spelling)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    InstanceGroupName: str
    InstanceId: str
    InstanceType: str
    InstanceStatus: InstanceStatusView
    LaunchTime: Time | None = None
    NodeLogicalId: str | None = None
    health: NodeHealthView = Field(
        description="Autopilot's view from HyperPod's Node Health events (and its sweep); a node it has no "
        "report of is Healthy as far as Autopilot knows."
    )
    repair: NodeRepairView | None = Field(default=None, description="The repair in flight, if any.")
    slurm: SlurmNodeView | None = Field(
        default=None,
        description="The node as Slurm shows it in the agent's latest report (matched by the first label of "
        "PrivateDnsHostname, Slurm's node name on HyperPod); null without a report naming it.",
    )
    load_balancer: list[TargetHealthView] | None = Field(
        default=None,
        alias="loadBalancer",
        description="A login node of a cluster with loginTargetGroupArns: its target health in each group "
        "(DescribeTargetHealth); absent for other nodes.",
    )


class NodeList(ApiModel):
    nodes: list[NodeView]
    next_token: str | None = None


class HealingBody(ApiModel):
    """PUT /clusters/{name}/healing."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"paused": True}]}, defer_build=True)

    paused: StrictBool = Field(
        description="true pauses automatic repairs (events and sweep) on the cluster; false resumes them."
    )
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Why repairs are paused (shown as `pausedReason`); only with `paused: true`.",
    )

    @field_validator("reason")
    @classmethod
    def _reason_only_for_a_pause(cls, reason: str | None, info: ValidationInfo) -> str | None:
        if reason is not None and info.data.get("paused") is False:
            raise ValueError("is only for a pause (paused: true)")
        return reason


class BreakerView(ApiModel):
    unhealthy_in_window: int = Field(
        description="Nodes reported Unhealthy within the breaker's window (since the last resume)."
    )
    node_count: int | None = Field(description="The cluster's nodes (SageMaker's current counts).")
    max_unhealthy_percent: int
    window_minutes: int
    tripped_at: Time | None = None


class HealingView(ApiModel):
    cluster_name: str
    paused: bool
    paused_reason: str | None = None
    paused_at: Time | None = None
    paused_by: str | None = Field(
        default=None, description="`breaker`, or the principal ARN that paused repairs through the API."
    )
    resumed_at: Time | None = None
    resumed_by: str | None = None
    breaker: BreakerView
    active_repairs: int = Field(description="Repairs holding one of the cluster's repair slots now.")
    max_concurrent_repairs: int


class CostView(ApiModel):
    """A cluster's spend at list prices, as the spend meter last computed it (docs/operations.md,
    "Spend meter"). Before its first run: zeros and ``asOf`` null."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "hourlyRateUsd": 199.4,
                    "monthToDateUsd": 4785.6,
                    "forecastUsd": 31907.84,
                    "budgetUsd": 25000.0,
                    "asOf": "2026-11-22T12:15:00.000Z",
                }
            ]
        }
    )

    hourly_rate_usd: float = Field(description="USD per hour of the cluster's billable nodes at list prices.")
    month_to_date_usd: float = Field(description="Estimated spend of this calendar month (UTC) so far.")
    forecast_usd: float = Field(description="Month to date + the hourly rate until the month's end.")
    budget_usd: float | None = Field(description="The cluster's monthly budget; null when it has none.")
    as_of: Time | None = Field(
        description="When the spend meter computed these figures; null before its first run."
    )
