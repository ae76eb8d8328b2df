"""Cluster lifecycle logic behind the API: accept, check and start Create/Cleanup workflows; read state.

Takes and returns models; AWS is reached through injected (or lazily created) clients and the
state-table DAL. The long-running work happens in the Step Functions workflows
(statemachines/create_cluster.asl.json, cleanup_cluster.asl.json) this module starts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from autopilot import aws
from autopilot.api.models import (
    ClusterList,
    ClusterSummary,
    ClusterView,
    CreateClusterBody,
    ErrorDetail,
    LiveClusterView,
    NodeList,
    NodeView,
    OperationAccepted,
    OperationErrorView,
    OperationView,
    ValidateBody,
    ValidationResult,
)
from autopilot.events import OperationEventDetail, emit_operation_event
from autopilot.idempotency import IdempotentRequest, IdempotentRequests
from autopilot.logic.authorize_delete import authorize_delete, check_stack, split_arns
from autopilot.observability import logger
from autopilot.settings import ApiSettings
from autopilot.state import (
    REUSABLE_NAME_STATUSES,
    Cluster,
    ClusterBusyError,
    ClusterNameTakenError,
    ClusterStatus,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    StateStore,
    new_operation_id,
    now_iso,
)
from autopilot.workflows.inputs import (
    BudgetSubscriber,
    CleanupClusterWorkflowInput,
    CreateClusterWorkflowInput,
    WorkflowBudget,
    WorkflowModel,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.validation.report import Problem, ValidationReport

CLUSTER_CONFIG_FILE = "cluster-config.json"

# Cost-allocation tags Autopilot puts on every cluster (activate them in Billing to see costs by them).
TAG_CLUSTER_NAME = "ClusterName"
TAG_OWNER = "owner"
TAG_PROJECT = "project"
TAG_OPERATION = "autopilot:operation-id"
MAX_TAGS = 50


class NotFoundError(Exception):
    """The cluster or operation does not exist (404)."""


class ConflictError(Exception):
    """The request conflicts with the current state (409)."""


class InvalidRequestError(Exception):
    """The request is well-formed but cannot be accepted (400); ``errors`` locate each problem."""

    def __init__(self, message: str, errors: list[ErrorDetail]) -> None:
        super().__init__(message)
        self.errors = errors


class WorkflowStartError(Exception):
    """Step Functions did not start the workflow; the operation is recorded as FAILED (503)."""

    def __init__(self, message: str, operation_id: str) -> None:
        super().__init__(message)
        self.operation_id = operation_id


Validator = Callable[[Mapping[str, Any], Mapping[str, Any] | None], "ValidationReport"]


def _stack_validator(settings: ApiSettings) -> Validator:
    """The API's validation: `autopilot validate --region <stack region>` with the stack's
    ExecutionRoleNamePatterns and account (docs/validation.md)."""
    # only the API's write paths need validation
    from autopilot.validation import ExecutionRolePolicy, split_patterns, validate_config  # noqa: PLC0415

    policy = ExecutionRolePolicy(split_patterns(settings.execution_role_name_patterns), settings.account)

    def validate(
        cluster_config: Mapping[str, Any], provisioning_parameters: Mapping[str, Any] | None
    ) -> ValidationReport:
        return validate_config(
            cluster_config, provisioning_parameters, region=settings.region, execution_roles=policy
        )

    return validate


def budget_name_for(cluster_name: str) -> str:
    """The AWS Budget Autopilot creates for a cluster (also what Cleanup deletes)."""
    return f"hyperpod-{cluster_name}"


def _problems(report: ValidationReport) -> tuple[list[ErrorDetail], list[ErrorDetail]]:
    def detail(p: Problem) -> ErrorDetail:
        return ErrorDetail(file=p.file, path=p.path, message=p.message)

    return [detail(p) for p in report.errors], [detail(p) for p in report.warnings]


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class ClusterOperations:
    """What the API does; one instance per execution environment."""

    def __init__(
        self,
        settings: ApiSettings,
        store: StateStore | None = None,
        *,
        sagemaker: SageMakerClient | None = None,
        stepfunctions: SFNClient | None = None,
        events: EventBridgeClient | None = None,
        cloudformation: CloudFormationClient | None = None,
        validator: Validator | None = None,
        idempotency: IdempotentRequests | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self._store = store or StateStore(settings.state_table_name)
        self._sagemaker = sagemaker
        self._sfn = stepfunctions
        self._events = events
        self._cloudformation = cloudformation
        self._validate = validator or _stack_validator(settings)
        self._idempotency = idempotency
        self._now = now or (lambda: datetime.now(UTC))

    @property
    def sagemaker(self) -> SageMakerClient:
        if self._sagemaker is None:
            self._sagemaker = aws.client("sagemaker")
        return self._sagemaker

    @property
    def stepfunctions(self) -> SFNClient:
        if self._sfn is None:
            self._sfn = aws.client("stepfunctions")
        return self._sfn

    @property
    def cloudformation(self) -> CloudFormationClient:
        if self._cloudformation is None:
            self._cloudformation = aws.client("cloudformation")
        return self._cloudformation

    @property
    def events(self) -> EventBridgeClient:
        if self._events is None:
            self._events = aws.client("events")
        return self._events

    @property
    def idempotency(self) -> IdempotentRequests:
        if self._idempotency is None:
            self._idempotency = IdempotentRequests(self._settings.idempotency_table_name)
        return self._idempotency

    def _once(
        self,
        key: str | None,
        action: OperationType,
        request: dict[str, Any],
        accept: Callable[[], OperationAccepted],
        *,
        requested_by: str | None,
        lambda_context: LambdaContext | None,
    ) -> OperationAccepted:
        """``accept()``, or with an Idempotency-Key the answer of the first request that used it."""
        if key is None:
            return accept()
        idempotent = IdempotentRequest(key=key, caller=requested_by, action=action.value, request=request)
        return self.idempotency.run(idempotent, accept, lambda_context=lambda_context)

    # --- validate -----------------------------------------------------------------------------

    def validate(self, body: ValidateBody) -> ValidationResult:
        report = self._validate(body.cluster_config, body.provisioning_parameters)
        errors, warnings = _problems(report)
        return ValidationResult(valid=not errors, errors=errors, warnings=warnings)

    # --- create -------------------------------------------------------------------------------

    def create_cluster(
        self,
        body: CreateClusterBody,
        *,
        requested_by: str | None,
        idempotency_key: str | None = None,
        lambda_context: LambdaContext | None = None,
    ) -> OperationAccepted:
        return self._once(
            idempotency_key,
            OperationType.CREATE_CLUSTER,
            body.model_dump(mode="json", by_alias=True),
            lambda: self._create_cluster(body, requested_by=requested_by),
            requested_by=requested_by,
            lambda_context=lambda_context,
        )

    def _create_cluster(self, body: CreateClusterBody, *, requested_by: str | None) -> OperationAccepted:
        report = self._validate(body.cluster_config, body.provisioning_parameters)
        errors, warnings = _problems(report)
        operation_id = new_operation_id(self._now())
        name = str(body.cluster_config.get("ClusterName", ""))
        cost_tags = [
            {"Key": TAG_CLUSTER_NAME, "Value": name},
            {"Key": TAG_OWNER, "Value": body.owner},
            {"Key": TAG_PROJECT, "Value": body.project},
            {"Key": TAG_OPERATION, "Value": operation_id},
        ]
        if not errors:
            errors += self._tag_problems(body.cluster_config, cost_tags)
        if errors:
            raise InvalidRequestError("the cluster configuration is invalid", errors)
        request = self._create_request(body.cluster_config, cost_tags)
        self._check_botocore("CreateCluster", request)
        self._check_name_free(name)

        budget = self._workflow_budget(body, name)
        created = now_iso()
        operation = Operation(
            operation_id=operation_id,
            operation_type=OperationType.CREATE_CLUSTER,
            cluster_name=name,
            status=OperationStatus.RUNNING,
            created_at=created,
            updated_at=created,
            requested_by=requested_by,
        )
        cluster = Cluster(
            cluster_name=name,
            status=ClusterStatus.CREATING,
            created_at=created,
            updated_at=created,
            last_operation_id=operation_id,
            owner=body.owner,
            project=body.project,
            budget_name=budget.budget_name if budget else None,
            created_by=requested_by,
        )
        try:
            self._store.start_create(cluster, operation)
        except ClusterNameTakenError as exc:
            raise ConflictError(f"cluster name {name!r} is taken") from exc

        workflow_input = CreateClusterWorkflowInput(
            operation_id=operation_id,
            cluster_name=name,
            create_cluster_request=request,
            cost_tags=cost_tags,
            budget=budget,
            rollback_on_failure=body.rollback_on_failure,
        )
        self._start(
            self._settings.create_cluster_state_machine_arn,
            operation,
            workflow_input,
            failed_status=ClusterStatus.CREATE_FAILED,
        )
        logger.info("cluster creation accepted", cluster=name, operation_id=operation_id)
        return OperationAccepted(
            operation_id=operation_id, cluster_name=name, status=OperationStatus.RUNNING, warnings=warnings
        )

    @staticmethod
    def _tag_problems(config: Mapping[str, Any], cost_tags: list[dict[str, str]]) -> list[ErrorDetail]:
        """The config's own tags may repeat Autopilot's cost tags, not contradict them."""
        problems: list[ErrorDetail] = []
        tags = config.get("Tags") or []
        wanted = {tag["Key"]: tag["Value"] for tag in cost_tags}
        for index, tag in enumerate(tags):
            key = tag.get("Key") if isinstance(tag, Mapping) else None
            if key in wanted and tag.get("Value") != wanted[key]:
                problems.append(
                    ErrorDetail(
                        file=CLUSTER_CONFIG_FILE,
                        path=f"Tags[{index}].Value",
                        message=f"the {key!r} tag is {tag.get('Value')!r} here but {wanted[key]!r} in the "
                        "request (Autopilot sets it from the request)",
                    )
                )
        extra = [
            tag
            for tag in cost_tags
            if tag["Key"] not in {t.get("Key") for t in tags if isinstance(t, Mapping)}
        ]
        if len(tags) + len(extra) > MAX_TAGS:
            problems.append(
                ErrorDetail(
                    file=CLUSTER_CONFIG_FILE,
                    path="Tags",
                    message=f"at most {MAX_TAGS} tags in all, and Autopilot adds {len(extra)}",
                )
            )
        return problems

    @staticmethod
    def _create_request(config: Mapping[str, Any], cost_tags: list[dict[str, str]]) -> dict[str, Any]:
        """The CreateCluster request: the config with Autopilot's cost tags (tagged from the first minute)."""
        request = dict(config)
        own = list(config.get("Tags") or [])
        present = {tag.get("Key") for tag in own}
        request["Tags"] = [*own, *(tag for tag in cost_tags if tag["Key"] not in present)]
        return request

    def _check_botocore(self, operation: str, params: Mapping[str, Any]) -> None:
        """The request as SageMaker will get it must pass botocore's own parameter validation."""
        shape = self.sagemaker.meta.service_model.operation_model(operation).input_shape
        assert shape is not None  # every SageMaker operation has an input shape
        report = ParamValidator().validate(params, shape)
        if report.has_errors():
            raise InvalidRequestError(
                f"the {operation} request is invalid",
                [ErrorDetail(file=CLUSTER_CONFIG_FILE, path="", message=report.generate_report())],
            )

    def _check_name_free(self, name: str) -> None:
        existing = self._store.get_cluster(name)
        if existing is not None and existing.status not in REUSABLE_NAME_STATUSES:
            raise ConflictError(
                f"cluster name {name!r} is taken (status {existing.status.value}, "
                f"operation {existing.last_operation_id})"
            )
        if self._describe(name) is not None:
            raise ConflictError(f"a SageMaker HyperPod cluster named {name!r} already exists")

    def _workflow_budget(self, body: CreateClusterBody, name: str) -> WorkflowBudget | None:
        if body.budget is None:
            return None
        subscribers = [BudgetSubscriber(SubscriptionType="SNS", Address=self._settings.alerts_topic_arn)]
        subscribers += [
            BudgetSubscriber(SubscriptionType="EMAIL", Address=a) for a in body.budget.alert_emails
        ]
        return WorkflowBudget(
            budget_name=budget_name_for(name),
            limit_amount=f"{Decimal(str(body.budget.monthly_limit_usd)):.2f}",
            cost_filter=f"user:{TAG_CLUSTER_NAME}${name}",
            subscribers=subscribers,
        )

    def _start(
        self,
        state_machine_arn: str,
        operation: Operation,
        workflow_input: WorkflowModel,
        *,
        failed_status: ClusterStatus,
    ) -> None:
        try:
            started = self.stepfunctions.start_execution(
                stateMachineArn=state_machine_arn,
                name=operation.operation_id,
                input=workflow_input.model_dump_json(by_alias=True),
            )
        except ClientError as exc:
            logger.exception("workflow did not start", operation_id=operation.operation_id)
            error = OperationError(error=f"StepFunctions.{_error_code(exc)}", cause=str(exc))
            self._store.fail_operation(operation.operation_id, operation.cluster_name, failed_status, error)
            emit_operation_event(
                OperationEventDetail(
                    operation_id=operation.operation_id,
                    operation_type=operation.operation_type.value,
                    cluster_name=operation.cluster_name,
                    status=OperationStatus.FAILED.value,
                    error=error.error,
                    cause=error.cause,
                ),
                client=self.events,
            )
            raise WorkflowStartError("the workflow could not be started", operation.operation_id) from exc
        self._store.set_execution_arn(operation.operation_id, started["executionArn"])

    # --- delete -------------------------------------------------------------------------------

    def delete_cluster(
        self,
        name: str,
        *,
        stack_name: str | None,
        requested_by: str | None,
        idempotency_key: str | None = None,
        lambda_context: LambdaContext | None = None,
    ) -> OperationAccepted:
        return self._once(
            idempotency_key,
            OperationType.DELETE_CLUSTER,
            {"clusterName": name, "stackName": stack_name},
            lambda: self._delete_cluster(name, stack_name=stack_name, requested_by=requested_by),
            requested_by=requested_by,
            lambda_context=lambda_context,
        )

    def _delete_cluster(
        self, name: str, *, stack_name: str | None, requested_by: str | None
    ) -> OperationAccepted:
        registered = self._store.get_cluster(name)
        live = self._describe(name)
        if live is None and (registered is None or registered.status is ClusterStatus.DELETED):
            raise NotFoundError(f"cluster {name!r} not found")
        live_record = registered is not None and registered.status is not ClusterStatus.DELETED
        creator = registered.created_by if registered is not None and live_record else None
        authorize_delete(name, requested_by, creator, split_arns(self._settings.admin_principal_arns))
        if registered is not None and registered.status in (ClusterStatus.CREATING, ClusterStatus.DELETING):
            raise ConflictError(
                f"cluster {name!r} is {registered.status.value} (operation {registered.last_operation_id}); "
                "wait for it to finish"
            )
        if stack_name is not None:
            check_stack(
                self.cloudformation,
                stack_name,
                name,
                own_stack=self._settings.stack_name,
                tag_key=TAG_CLUSTER_NAME,
            )
        operation_id = new_operation_id(self._now())
        created = now_iso()
        operation = Operation(
            operation_id=operation_id,
            operation_type=OperationType.DELETE_CLUSTER,
            cluster_name=name,
            status=OperationStatus.RUNNING,
            created_at=created,
            updated_at=created,
            requested_by=requested_by,
        )
        adopt = registered is None or registered.status is ClusterStatus.DELETED
        cluster = Cluster(
            cluster_name=name,
            status=ClusterStatus.DELETING,
            created_at=registered.created_at if registered and not adopt else created,
            updated_at=created,
            last_operation_id=operation_id,
            cluster_arn=live.ClusterArn if live else None,
        )
        try:
            self._store.start_delete(cluster, operation, adopt=adopt)
        except ClusterBusyError as exc:
            raise ConflictError(f"another operation started on cluster {name!r}; try again") from exc
        workflow_input = CleanupClusterWorkflowInput(
            operation_id=operation_id,
            cluster_name=name,
            budget_name=(
                registered.budget_name if registered and registered.budget_name else budget_name_for(name)
            ),
            stack_name=stack_name,
        )
        self._start(
            self._settings.cleanup_cluster_state_machine_arn,
            operation,
            workflow_input,
            failed_status=ClusterStatus.DELETE_FAILED,
        )
        logger.info("cluster cleanup accepted", cluster=name, operation_id=operation_id)
        return OperationAccepted(operation_id=operation_id, cluster_name=name, status=OperationStatus.RUNNING)

    # --- reads --------------------------------------------------------------------------------

    def _describe(self, name: str) -> LiveClusterView | None:
        try:
            described = self.sagemaker.describe_cluster(ClusterName=name)
        except ClientError as exc:
            if _error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return None
            raise
        return LiveClusterView.model_validate(described)

    def get_cluster(self, name: str) -> ClusterView:
        registered = self._store.get_cluster(name)
        live = self._describe(name)
        if registered is None and live is None:
            raise NotFoundError(f"cluster {name!r} not found")
        return ClusterView(
            cluster_name=name,
            status=registered.status if registered else None,
            owner=registered.owner if registered else None,
            project=registered.project if registered else None,
            budget_name=registered.budget_name if registered else None,
            last_operation_id=registered.last_operation_id if registered else None,
            sagemaker=live,
            history=self._store.list_history(name) if registered else [],
        )

    def list_clusters(self, *, limit: int, next_token: str | None, include_deleted: bool) -> ClusterList:
        page = self._store.list_clusters(limit=limit, next_token=next_token, include_deleted=include_deleted)
        clusters = [ClusterSummary.model_validate(c.model_dump()) for c in page.items]
        return ClusterList(clusters=clusters, next_token=page.next_token)

    def list_nodes(self, name: str, *, limit: int, next_token: str | None) -> NodeList:
        kwargs: dict[str, Any] = {"ClusterName": name, "MaxResults": limit}
        if next_token:
            kwargs["NextToken"] = next_token
        try:
            response = self.sagemaker.list_cluster_nodes(**kwargs)
        except ClientError as exc:
            if _error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                raise NotFoundError(f"cluster {name!r} not found") from exc
            raise
        nodes = [NodeView.model_validate(n) for n in response.get("ClusterNodeSummaries", [])]
        return NodeList(nodes=nodes, next_token=response.get("NextToken") or None)

    def get_operation(self, operation_id: str) -> OperationView:
        operation = self._store.get_operation(operation_id)
        if operation is None:
            raise NotFoundError(f"operation {operation_id!r} not found")
        return OperationView(
            operation_id=operation.operation_id,
            kind=operation.operation_type,
            cluster_name=operation.cluster_name,
            status=operation.status,
            created_at=operation.created_at,
            updated_at=operation.updated_at,
            requested_by=operation.requested_by,
            execution_arn=operation.execution_arn,
            steps=operation.steps,
            error=OperationErrorView(**operation.error.model_dump()) if operation.error else None,
            leftovers=operation.leftovers,
            cluster_arn=operation.cluster_arn,
            rolled_back=operation.rolled_back,
        )
