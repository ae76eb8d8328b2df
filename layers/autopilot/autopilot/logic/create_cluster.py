"""POST /clusters: check the config, register the cluster and start the Create workflow
(statemachines/create_cluster.asl.json), which does the long-running work.

The request's cluster-config.json and provisioning-parameters.json are validated once, into the models
the validation builds (a ``CreateClusterCommand``); everything after reads those, never the JSON again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.validate import ParamValidator

from autopilot.errors import CallerMayNotUseError, ClusterNameTakenError, ConflictError, InvalidRequestError
from autopilot.idempotency import (
    IdempotencyKeyInProgressError,
)
from autopilot.logic.budget_enforcement import worker_groups
from autopilot.logic.callers import acts_as_any
from autopilot.logic.project_budget import check_project_budget
from autopilot.logic.read_clusters import describe_cluster
from autopilot.logic.validate_config import problems
from autopilot.models.bodies import CreateClusterBody, CreateClusterPlan, OperationAccepted
from autopilot.models.cost_allocation import (
    TAG_CLUSTER_NAME,
    TAG_OPERATION,
    CostTagKeys,
    budget_name_for,
    cost_filter,
    cost_tag_set,
    file_system_ids,
    project_budget_name_for,
)
from autopilot.models.error_body import ErrorDetail
from autopilot.models.records import (
    REUSABLE_NAME_STATUSES,
    Cluster,
    ClusterStatus,
    Operation,
    OperationStatus,
    OperationType,
    new_operation_id,
)
from autopilot.models.values import BudgetEnforcement, stored_budgets
from autopilot.observability import logger
from autopilot.workflows.inputs import BudgetSubscriber, CreateClusterWorkflowInput, WorkflowBudget
from autopilot.workflows.start import start_workflow

if TYPE_CHECKING:
    from autopilot_config.models.cluster_config import CreateClusterRequest
    from autopilot_config.models.provisioning import ProvisioningParameters
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from autopilot.logic.dependencies import Dependencies

CLUSTER_CONFIG_FILE = "cluster-config.json"
# A dry run's autopilot:operation-id tag value: the create assigns the operation's id.
DRY_RUN_OPERATION_ID = "assigned-at-create"
MAX_TAGS = 50


def create_cluster(
    deps: Dependencies,
    body: CreateClusterBody,
    *,
    requested_by: str | None,
    idempotency_key: str | None = None,
    lambda_context: LambdaContext | None = None,
) -> OperationAccepted:
    # "name taken" or "in progress" may be this key's own first attempt (Dependencies.once_or_recorded).
    # The key names the request as it came, before validation: the name it asks for finds that attempt.
    return deps.once_or_recorded(
        idempotency_key,
        OperationType.CREATE_CLUSTER,
        body.model_dump(mode="json", by_alias=True),
        lambda marker: _create_cluster(deps, body, requested_by=requested_by, marker=marker),
        cluster_name=str(body.cluster_config.get("ClusterName", "")),
        recorded_on=(ConflictError, IdempotencyKeyInProgressError),
        requested_by=requested_by,
        lambda_context=lambda_context,
    )


@dataclass(frozen=True)
class CreateClusterCommand:
    """POST /clusters once validated: the cluster config and provisioning parameters as the models the
    validation built (None: no provisioning parameters), and the request's own fields (``body``: owner,
    project, budget ...; its JSON documents are not read again)."""

    config: CreateClusterRequest
    provisioning: ProvisioningParameters | None
    body: CreateClusterBody

    @property
    def name(self) -> str:
        return self.config.ClusterName

    def documents(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The two documents as JSON again, for what reads JSON (the caller checks, the FSx file systems)."""
        config = self.config.model_dump(mode="json", exclude_unset=True)
        return config, self.provisioning.model_dump(mode="json") if self.provisioning else None


def _validated(deps: Dependencies, body: CreateClusterBody) -> tuple[CreateClusterCommand, list[ErrorDetail]]:
    """The request as a command (every validation error a 400), and the validation's warnings."""
    report = deps.validate(body.cluster_config, body.provisioning_parameters)
    errors, warnings = problems(report)
    if errors:
        raise InvalidRequestError("the cluster configuration is invalid", errors)
    # A report without errors carries the models its schema check built (validation/engine.py).
    if report.cluster_config is None:
        raise RuntimeError("the validation passed a cluster config without its model")
    return CreateClusterCommand(report.cluster_config, report.provisioning_parameters, body), warnings


@dataclass(frozen=True)
class _Plan:
    """What a create will do, every check passed: the request SageMaker gets, and the budgets."""

    name: str
    request: dict[str, Any]
    cost_tags: list[dict[str, str]]
    budget: WorkflowBudget | None
    project_budget: WorkflowBudget | None
    warnings: list[ErrorDetail]


# What _plan checks, in its order (a dry run lists them: each passed if the plan came back).
PLAN_CHECKS = (
    "the cluster config and provisioning parameters pass Autopilot's validation for the stack's region",
    "the config's own tags agree with Autopilot's cost tags, and all fit in SageMaker's 50",
    "the CreateCluster request, cost tags included, passes botocore's parameter validation",
    "no cluster of that name is registered with Autopilot or exists in SageMaker",
    "a project budget asked for has the terms of the project's budget, unless the caller owns it",
    "each login target group is an existing `ip` target group of this account and region",
)
# With CallerResourceChecks Enabled (autopilot.caller_resources), after the botocore check.
CALLER_CHECK = (
    "the caller may pass each role itself (iam:PassRole, or AdminPrincipalArns); the lifecycle buckets, "
    "subnets and security groups are this account's, in the cluster's VPC; the caller may register "
    "targets in each login target group"
)


def _plan(
    deps: Dependencies, command: CreateClusterCommand, operation_id: str, *, requested_by: str | None
) -> _Plan:
    body, name = command.body, command.name
    keys = deps.settings.cost_tag_keys
    tag_set = cost_tag_set(
        name, owner=body.owner, project=body.project, cost_center=body.cost_center, keys=keys
    )
    cost_tags = [{"Key": k, "Value": v} for k, v in {**tag_set, TAG_OPERATION: operation_id}.items()]
    tag_errors = _tag_problems(command.config, cost_tags)
    if tag_errors:
        raise InvalidRequestError("the cluster configuration is invalid", tag_errors)
    request = _create_request(command.config, cost_tags)
    _check_botocore(deps, "CreateCluster", request)
    _check_caller_may_use(deps, command, requested_by)
    _check_name_free(deps, name)
    warnings = check_project_budget(deps.store, body, requested_by, matching=deps.settings.owner_matching)
    _check_login_target_groups(deps, body.login_target_group_arns or [], requested_by)
    return _Plan(
        name=name,
        request=request,
        cost_tags=cost_tags,
        budget=_workflow_budget(deps, body, name),
        project_budget=_project_budget(deps, body, keys),
        warnings=warnings,
    )


def plan_create(
    deps: Dependencies, body: CreateClusterBody, *, requested_by: str | None = None
) -> CreateClusterPlan:
    """POST /clusters?dryRun=true: every check a create makes, and what it would send; nothing is
    registered, created or started (so no Idempotency-Key applies)."""
    command, warnings = _validated(deps, body)
    plan = _plan(deps, command, DRY_RUN_OPERATION_ID, requested_by=requested_by)
    return CreateClusterPlan(
        cluster_name=plan.name,
        create_cluster_request=plan.request,
        cost_tags=plan.cost_tags,
        budget=plan.budget.model_dump(mode="json", by_alias=True) if plan.budget else None,
        project_budget=plan.project_budget.model_dump(mode="json", by_alias=True)
        if plan.project_budget
        else None,
        checks=_plan_checks(deps),
        warnings=[*warnings, *plan.warnings],
    )


def _create_cluster(
    deps: Dependencies, body: CreateClusterBody, *, requested_by: str | None, marker: str | None = None
) -> OperationAccepted:
    command, warnings = _validated(deps, body)
    # One "now" for the id, the operation and the cluster record (deps.now: the clock module's).
    now = deps.now()
    operation_id = new_operation_id(now)
    plan = _plan(deps, command, operation_id, requested_by=requested_by)
    name, request, cost_tags, warnings = plan.name, plan.request, plan.cost_tags, [*warnings, *plan.warnings]
    budget, project_budget = plan.budget, plan.project_budget
    operation = Operation(
        operation_id=operation_id,
        operation_type=OperationType.CREATE_CLUSTER,
        cluster_name=name,
        status=OperationStatus.RUNNING,
        created_at=now,
        updated_at=now,
        requested_by=requested_by,
        idempotency=marker,
    )
    cluster = Cluster(
        cluster_name=name,
        status=ClusterStatus.CREATING,
        created_at=now,
        updated_at=now,
        last_operation_id=operation_id,
        owner=body.owner,
        project=body.project,
        budget_name=budget.budget_name if budget else None,
        budget_limit_usd=budget.limit_amount if budget else None,
        cost_center=body.cost_center,
        file_system_ids=file_system_ids(command.documents()[1]) or None,
        created_by=requested_by,
        owners=body.owners,
        budget_enforcement=(body.budget.enforcement if body.budget else BudgetEnforcement.ALERT).value,
        worker_groups=worker_groups(command.config, command.provisioning),
        project_budget_limit_usd=project_budget.limit_amount if project_budget else None,
        project_budget_emails=list(body.budget.alert_emails) if project_budget and body.budget else None,
        login_target_group_arns=body.login_target_group_arns or None,
        account_budgets=stored_budgets(body.account_budgets) if body.account_budgets else None,
    )
    try:
        deps.store.start_create(cluster, operation)
    except ClusterNameTakenError as exc:
        raise ConflictError(f"cluster name {name!r} is taken") from exc

    workflow_input = CreateClusterWorkflowInput(
        operation_id=operation_id,
        cluster_name=name,
        create_cluster_request=request,
        cost_tags=cost_tags,
        budget=budget,
        project_budget=project_budget,
        rollback_on_failure=body.rollback_on_failure,
        login_target_group_arns=body.login_target_group_arns or [],
    )
    start_workflow(
        deps,
        deps.settings.create_cluster_state_machine_arn,
        operation,
        workflow_input,
        failed_status=ClusterStatus.CREATE_FAILED,
    )
    logger.info("cluster creation accepted", cluster=name, operation_id=operation_id)
    return OperationAccepted(
        operation_id=operation_id, cluster_name=name, status=OperationStatus.RUNNING, warnings=warnings
    )


def _tag_problems(config: CreateClusterRequest, cost_tags: list[dict[str, str]]) -> list[ErrorDetail]:
    """The config's own tags may repeat Autopilot's cost tags, not contradict them."""
    found: list[ErrorDetail] = []
    tags = config.Tags or []
    wanted = {tag["Key"]: tag["Value"] for tag in cost_tags}
    for index, tag in enumerate(tags):
        if tag.Key in wanted and tag.Value != wanted[tag.Key]:
            found.append(
                ErrorDetail(
                    file=CLUSTER_CONFIG_FILE,
                    path=f"Tags[{index}].Value",
                    message=f"the {tag.Key!r} tag is {tag.Value!r} here but {wanted[tag.Key]!r} in the "
                    "request (Autopilot sets it from the request)",
                )
            )
    extra = [tag for tag in cost_tags if tag["Key"] not in {t.Key for t in tags}]
    if len(tags) + len(extra) > MAX_TAGS:
        found.append(
            ErrorDetail(
                file=CLUSTER_CONFIG_FILE,
                path="Tags",
                message=f"at most {MAX_TAGS} tags in all, and Autopilot adds {len(extra)}",
            )
        )
    return found


def _create_request(config: CreateClusterRequest, cost_tags: list[dict[str, str]]) -> dict[str, Any]:
    """The CreateCluster request: the config with Autopilot's cost tags (tagged from the first minute).

    The config as JSON again, every field it set and nothing else: what the caller wrote (a timestamp,
    NextPatchDate, comes back as ISO 8601 whichever form botocore accepted it in)."""
    request = config.model_dump(mode="json", exclude_unset=True)
    present = {tag.Key for tag in config.Tags or []}
    request["Tags"] = [*request.get("Tags", []), *(tag for tag in cost_tags if tag["Key"] not in present)]
    return request


def _check_botocore(deps: Dependencies, operation: str, params: Mapping[str, Any]) -> None:
    """The request as SageMaker will get it must pass botocore's own parameter validation."""
    shape = deps.sagemaker.meta.service_model.operation_model(operation).input_shape
    assert shape is not None  # every SageMaker operation has an input shape
    report = ParamValidator().validate(params, shape)
    if report.has_errors():
        raise InvalidRequestError(
            f"the {operation} request is invalid",
            [ErrorDetail(file=CLUSTER_CONFIG_FILE, path="", message=report.generate_report())],
        )


def _plan_checks(deps: Dependencies) -> list[str]:
    checks = list(PLAN_CHECKS)
    if deps.caller_resources is not None:
        checks.insert(3, CALLER_CHECK)
    return checks


def _check_caller_may_use(
    deps: Dependencies, command: CreateClusterCommand, requested_by: str | None
) -> None:
    """No confused deputy: a role the caller may not pass is a 403, a bucket, subnet or security group
    that is not this account's (or not in the cluster's VPC) a 400, each naming its field."""
    checker = deps.caller_resources
    if checker is None:
        return
    # the validation package loads on the write paths' first use, not at the function's init
    from autopilot_config.validation.documents import ClusterDocuments  # noqa: PLC0415

    refusals = checker.check(
        ClusterDocuments(*command.documents()),
        requested_by,
        admin=_is_admin(deps, requested_by),
    )

    def details(problems: list[Any]) -> list[ErrorDetail]:
        return [ErrorDetail(file=p.file, path=p.path, message=p.message) for p in problems]

    if refusals.forbidden:
        raise CallerMayNotUseError(
            "the request names resources its caller may not use", details(refusals.forbidden)
        )
    if refusals.invalid:
        raise InvalidRequestError(
            "the request names resources outside this account or the cluster's VPC", details(refusals.invalid)
        )


def _is_admin(deps: Dependencies, caller: str | None) -> bool:
    settings = deps.settings
    return acts_as_any(caller, settings.admin_principal_arns, matching=settings.owner_matching)


def _check_login_target_groups(deps: Dependencies, arns: list[str], requested_by: str | None) -> None:
    if not arns:
        return
    # Imported here: a create names login target groups rarely, and the check brings the agent's trust
    # and its models (~8 ms of the first POST /clusters; docs/operations.md, "Cold start").
    from autopilot.logic.login_targets import target_group_problems  # noqa: PLC0415

    problems = target_group_problems(
        deps.login_targets, arns, account=deps.settings.account, region=deps.settings.region
    )
    if problems:
        raise InvalidRequestError(
            "a login target group cannot hold the login nodes",
            [
                ErrorDetail(path=f"loginTargetGroupArns[{i}]", message=f"{arns[i]} {why}")
                for i, why in problems
            ],
        )
    # No confused deputy: the login nodes go only into target groups the caller may register targets in.
    checker = deps.caller_resources
    if checker is None or _is_admin(deps, requested_by):
        return
    refused = checker.check_target_groups(arns, requested_by)
    if refused:
        raise CallerMayNotUseError(
            "the request names resources its caller may not use",
            [ErrorDetail(path=f"loginTargetGroupArns[{i}]", message=why) for i, why in refused],
        )


def _check_name_free(deps: Dependencies, name: str) -> None:
    existing = deps.store.get_cluster(name)
    if existing is not None and existing.status not in REUSABLE_NAME_STATUSES:
        raise ConflictError(
            f"cluster name {name!r} is taken (status {existing.status.value}, "
            f"operation {existing.last_operation_id})"
        )
    if describe_cluster(deps, name) is not None:
        raise ConflictError(f"a SageMaker HyperPod cluster named {name!r} already exists")


def _subscribers(deps: Dependencies, body: CreateClusterBody) -> list[BudgetSubscriber]:
    emails = body.budget.alert_emails if body.budget else []
    # AWS Budgets notifies BudgetAlertsFunction, which publishes the enriched alert on the alerts topic.
    subscribers = [
        BudgetSubscriber(SubscriptionType="SNS", Address=deps.settings.budget_notifications_topic_arn)
    ]
    return subscribers + [BudgetSubscriber(SubscriptionType="EMAIL", Address=a) for a in emails]


def _workflow_budget(deps: Dependencies, body: CreateClusterBody, name: str) -> WorkflowBudget | None:
    """The cluster's budget: the request's limit, else the stack's DefaultMonthlyBudgetUsd (0: none)."""
    requested = body.budget.monthly_limit_usd if body.budget else None
    limit = Decimal(str(requested)) if requested is not None else deps.settings.default_monthly_budget_usd
    if limit <= 0:
        return None
    return WorkflowBudget(
        budget_name=budget_name_for(name),
        limit_amount=f"{limit:.2f}",
        cost_filter=cost_filter(TAG_CLUSTER_NAME, name),
        subscribers=_subscribers(deps, body),
    )


def _project_budget(deps: Dependencies, body: CreateClusterBody, keys: CostTagKeys) -> WorkflowBudget | None:
    """The project's shared budget, when asked for: the workflow creates it unless the project has one
    (the first cluster's limit holds); Cleanup removes it with the project's last cluster."""
    if body.budget is None or body.budget.project_monthly_limit_usd is None:
        return None
    return WorkflowBudget(
        budget_name=project_budget_name_for(body.project),
        limit_amount=f"{Decimal(str(body.budget.project_monthly_limit_usd)):.2f}",
        cost_filter=cost_filter(keys.project, body.project),
        subscribers=_subscribers(deps, body),
    )
