"""What the API's use cases reach AWS through: settings, the state store, clients (created on first
use), the config validator, idempotency and the clock. One per execution environment
(autopilot.api.wiring.deps).

Only the state store, which every route reads, is made with it: the tables and helpers a few routes
use (healing, the agent's reports, the history, the login targets) are imported and made on their
first use, so the API's init imports none of their modules (docs/operations.md, "Cold start")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot import clock
from autopilot.aws import LazyClient, client
from autopilot.dal.state_table import StateTable
from autopilot.idempotency import IdempotentRequest, IdempotentRequests, recorded_answer, request_marker
from autopilot.settings import healing_settings as load_healing_settings

if TYPE_CHECKING:
    from autopilot_config.validation.report import ValidationReport
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.caller_resources import CallerResourceChecker
    from autopilot.dal.agent import AgentTable
    from autopilot.dal.healing import HealingTable
    from autopilot.dal.operation_history import OperationHistory
    from autopilot.dal.state_store import StateStore
    from autopilot.logic.login_targets import LoginTargets
    from autopilot.models.bodies import OperationAccepted
    from autopilot.models.records import OperationType
    from autopilot.settings import ApiSettings, HealingSettings

Validator = Callable[[Mapping[str, Any], Mapping[str, Any] | None], "ValidationReport"]


def _stack_validator(settings: ApiSettings) -> Validator:
    """The API's validation: `autopilot validate --region <stack region>` with the stack's
    ExecutionRoleNamePatterns and account, MaxInstancesPerCluster and AllowedInstanceTypes
    (docs/validation.md), EksClusterNames, and `--aws` when the stack's
    PreflightChecks is Enabled."""
    # only the API's write paths need validation
    from autopilot_config.validation import (  # noqa: PLC0415
        ClusterCaps,
        EksClusterPolicy,
        ExecutionRolePolicy,
        OnlineChecker,
        validate_config,
    )

    policy = ExecutionRolePolicy(settings.execution_role_name_patterns, settings.account)
    eks = EksClusterPolicy(settings.eks_cluster_names, settings.account, settings.region)
    caps = ClusterCaps(settings.max_instances_per_cluster, settings.allowed_instance_types)

    def validate(
        cluster_config: Mapping[str, Any], provisioning_parameters: Mapping[str, Any] | None
    ) -> ValidationReport:
        return validate_config(
            cluster_config,
            provisioning_parameters,
            region=settings.region,
            execution_roles=policy,
            caps=caps,
            eks_clusters=eks,
            online=OnlineChecker(region=settings.region, make_client=client)
            if settings.preflight_checks
            else None,
        )

    return validate


class Dependencies:
    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
    stepfunctions: LazyClient[SFNClient] = LazyClient("stepfunctions")
    cloudformation: LazyClient[CloudFormationClient] = LazyClient("cloudformation")
    events: LazyClient[EventBridgeClient] = LazyClient("events")

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
        healing: HealingTable | None = None,
        healing_settings: HealingSettings | None = None,
        agents: AgentTable | None = None,
        login_targets: LoginTargets | None = None,
        caller_resources: CallerResourceChecker | None = None,
    ) -> None:
        self.settings = settings
        self.store: StateStore = store or StateTable(settings.state_table_name)
        self._sagemaker = sagemaker
        self._stepfunctions = stepfunctions
        self._events = events
        self._cloudformation = cloudformation
        self.validate = validator or _stack_validator(settings)
        self._idempotency = idempotency
        self.now = now or (lambda: clock.now())  # noqa: PLW0108  (read at each call: the sandbox sets it)
        self._healing = healing
        self._history: OperationHistory | None = None
        self._agents = agents
        self._healing_settings = healing_settings
        self._login_targets = login_targets
        self._caller_resources = caller_resources

    @property
    def caller_resources(self) -> CallerResourceChecker | None:
        """The checks of what a create's caller names (CallerResourceChecks; None when Disabled)."""
        if self._caller_resources is None and self.settings.caller_resource_checks:
            from autopilot.caller_resources import (  # noqa: PLC0415  (create path only)
                CallerResourceChecker,
            )

            self._caller_resources = CallerResourceChecker(
                account=self.settings.account, region=self.settings.region
            )
        return self._caller_resources

    @property
    def healing(self) -> HealingTable:
        """Node health, repairs and the breaker (the node, repair and healing routes)."""
        if self._healing is None:
            from autopilot.dal.healing import HealingTable  # noqa: PLC0415  (first use)

            self._healing = HealingTable(self.settings.state_table_name)
        return self._healing

    @property
    def history(self) -> OperationHistory:
        """A cluster's operations, newest first (GET /clusters/{name}/operations)."""
        if self._history is None:
            from autopilot.dal.operation_history import OperationHistory  # noqa: PLC0415  (first use)

            self._history = OperationHistory(self.settings.state_table_name)
        return self._history

    @property
    def agents(self) -> AgentTable:
        """The Slurm agent's latest report per cluster (GET /clusters/{name} and its nodes)."""
        if self._agents is None:
            from autopilot.dal.agent import AgentTable  # noqa: PLC0415  (first use)

            self._agents = AgentTable(self.settings.state_table_name)
        return self._agents

    @property
    def login_targets(self) -> LoginTargets:
        """ELBv2 for the login target groups (created on first use: few requests name any)."""
        if self._login_targets is None:
            from autopilot.logic.agent.trust import ControllerReader  # noqa: PLC0415  (first use)
            from autopilot.logic.login_targets import LoginTargets  # noqa: PLC0415

            self._login_targets = LoginTargets(reader=ControllerReader(sagemaker=self._sagemaker))
        return self._login_targets

    @property
    def healing_settings(self) -> HealingSettings:
        """The healing parameters, read on first use (only the node and healing routes need them)."""
        if self._healing_settings is None:
            self._healing_settings = load_healing_settings()
        return self._healing_settings

    @property
    def idempotency(self) -> IdempotentRequests:
        if self._idempotency is None:
            self._idempotency = IdempotentRequests(self.settings.idempotency_table_name)
        return self._idempotency

    def once(
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

    def once_or_recorded(
        self,
        key: str | None,
        action: OperationType,
        request: dict[str, Any],
        accept: Callable[[str | None], OperationAccepted],
        *,
        cluster_name: str,
        recorded_on: tuple[type[Exception], ...],
        requested_by: str | None,
        lambda_context: LambdaContext | None,
    ) -> OperationAccepted:
        """``once``, with ``accept`` given the request's marker to record on its operation. A ``recorded_on``
        error ("name taken", "in progress", ...) may be this key's own first attempt, which recorded its
        operation and then failed (a 503 for bookkeeping) or lost its answer: that operation answers it."""
        idempotent = (
            IdempotentRequest(key=key, caller=requested_by, action=action.value, request=request)
            if key is not None
            else None
        )
        marker = request_marker(idempotent) if idempotent is not None else None
        try:
            return self.once(
                key,
                action,
                request,
                lambda: accept(marker),
                requested_by=requested_by,
                lambda_context=lambda_context,
            )
        except recorded_on:
            accepted = (
                recorded_answer(self.store, cluster_name, idempotent) if idempotent is not None else None
            )
            if accepted is None:
                raise
            return accepted
