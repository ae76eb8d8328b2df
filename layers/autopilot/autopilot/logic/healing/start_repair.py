"""Starting a node repair: the claim (exactly once per fault) and the ReplaceNode workflow.

One entry point for the three triggers: the Node Health event (ClusterEventsFunction), the sweep and
an operator's POST /clusters/{name}/nodes/{nodeId}/reboot|replace. All meet the same claim, so a
fault is never repaired twice and a node never has two repairs at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NoReturn

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict

from autopilot.aws import error_code
from autopilot.emitted_events import emit_operation_failed
from autopilot.errors import WorkflowStartError
from autopilot.logic.healing.decide import gpus_lost
from autopilot.models.records import (
    Fault,
    NodeAction,
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    RepairActor,
    RepairTrigger,
    new_operation_id,
)
from autopilot.observability import logger
from autopilot.workflows.inputs import RepairDeadlines, ReplaceNodeWorkflowInput

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.dal.healing import HealingTable
    from autopilot.settings import HealingSettings


# The ReplaceNode workflow reaches its own deadlines an hour before its 24 h TimeoutSeconds, so it
# records and alerts itself (tests/integration/test_asl_contract.py holds the template's maxima to it).
WORKFLOW_DEADLINE_SECONDS = 82800
# AgentPollSeconds' MaxValue in template.yaml: the bounds below hold for any value an operator can set.
AGENT_POLL_MAX_SECONDS = 300


def agent_command_seconds(poll_seconds: int) -> int:
    """The limit of Drain Node and Requeue Jobs (statemachines/replace_node.asl.json): 5 minutes and three
    of the agent's polls."""
    return 300 + 3 * poll_seconds


def resume_seconds(poll_seconds: int) -> int:
    """The limit of Resume In Slurm: 30 minutes and six of the agent's polls."""
    return 1800 + 6 * poll_seconds


# The agent steps' limits at the largest AgentPollSeconds; test_asl_contract holds them to the ASL.
AGENT_COMMAND_SECONDS = agent_command_seconds(AGENT_POLL_MAX_SECONDS)
RESUME_SECONDS = resume_seconds(AGENT_POLL_MAX_SECONDS)


def slurm_steps_seconds(settings: HealingSettings) -> int:
    """The longest a repair spends on Slurm (drain, the wait for the jobs, requeue, resume)."""
    return settings.drain_timeout_minutes * 60 + 2 * AGENT_COMMAND_SECONDS + RESUME_SECONDS


class RepairRequest(BaseModel):
    """What to repair and why.

    ``fault.detected_at`` orders faults (for an event its ``time``, for the sweep and the API
    the time of the request): a repair is claimed only for a fault later than the last one claimed.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    cluster_name: str
    node_id: str
    action: NodeAction
    trigger: RepairTrigger
    fault: Fault
    actor: RepairActor = RepairActor.AUTOPILOT
    # The node's instance group, when known (kept on the node item).
    instance_group: str | None = None
    # The principal of an API request.
    requested_by: str | None = None
    # False for a node that may only be rebooted (a controller, a login node without AllowLoginReplace):
    # the workflow alerts instead of escalating a reboot that did not heal it. No default: every
    # trigger says it (the decide table's ``Decision.allow_replace``, or the API's own check).
    allow_replace: bool
    # The node's group runs OnStartDeepHealthChecks (ClusterTopology.deep_health_checks): a new instance
    # there is checked for about two hours before Running, so the deadlines of a replace allow for it.
    deep_health_checks: bool


def repair_deadlines(settings: HealingSettings, *, deep_health_checks: bool) -> RepairDeadlines:
    """The workflow's deadlines. A replace's new instance (Autopilot's, or HyperPod's own that Autopilot
    observes) of a deep-health group spends DeepHealthCheckMinutes in DeepHealthCheckInProgress before it
    is Running: without the allowance a node working as designed would be escalated or replaced twice.
    A reboot keeps its instance: no allowance. The allowance shrinks where it would take the longest
    path (a slot, HyperPod's repair or a reboot, a replace, the Slurm steps) past
    WORKFLOW_DEADLINE_SECONDS."""
    reboot, replace = settings.reboot_deadline_minutes * 60, settings.replace_deadline_minutes * 60
    hyperpod = settings.hyperpod_repair_deadline_minutes * 60
    allowance = settings.deep_health_check_minutes * 60 if deep_health_checks else 0
    # the slot wait and the replace each carry it once, HyperPod's repair once more
    spare = WORKFLOW_DEADLINE_SECONDS - slurm_steps_seconds(settings) - 2 * replace - max(reboot, hyperpod)
    allowance = min(allowance, max(0, spare // 3))
    return RepairDeadlines(
        reboot_seconds=reboot, replace_seconds=replace + allowance, hyperpod_seconds=hyperpod + allowance
    )


def start_repair(
    request: RepairRequest,
    *,
    healing: HealingTable,
    stepfunctions: SFNClient,
    events: EventBridgeClient,
    settings: HealingSettings,
    now: datetime,
) -> Operation | None:
    """Claim the repair and start its ReplaceNode execution; the RUNNING operation, or None when
    nothing was started because a repair is open on the node or this fault was claimed already.

    The claim writes the node's ``openRepair``/``lastFaultAt``, the ReplaceNode operation and its
    history entry in one transaction (dal/healing.py). The execution is named after the operation,
    so a retried start meets the same execution (ExecutionAlreadyExists: started). When Step Functions
    refuses the start, the operation is recorded FAILED with the cause, the claim is undone (the node
    can be claimed again for the same fault), the failure event is emitted and WorkflowStartError
    raised. Callers check the breaker (paused) before calling: this function does not.
    """
    node = healing.get_node(request.cluster_name, request.node_id)
    operation = Operation(
        operation_id=new_operation_id(now),
        operation_type=OperationType.REPLACE_NODE,
        cluster_name=request.cluster_name,
        status=OperationStatus.RUNNING,
        created_at=now,
        updated_at=now,
        requested_by=request.requested_by,
        node_id=request.node_id,
        trigger=request.trigger,
        fault=request.fault,
        actor=request.actor,
        actions=[],
    )
    if not healing.claim_repair(
        operation, fault_at=request.fault.detected_at, instance_group=request.instance_group
    ):
        logger.info(
            "repair not claimed: one is open or the fault was claimed",
            cluster=request.cluster_name,
            node=request.node_id,
            trigger=request.trigger.value,
            open_repair=node.open_repair if node else None,
        )
        return None
    workflow_input = ReplaceNodeWorkflowInput(
        operation_id=operation.operation_id,
        cluster_name=request.cluster_name,
        node_id=request.node_id,
        action=request.action,
        trigger=request.trigger,
        fault=request.fault,
        deadlines=repair_deadlines(settings, deep_health_checks=request.deep_health_checks),
        allow_replace=request.allow_replace,
        gpus_lost=gpus_lost(request.fault),
    )
    state_machine = settings.replace_node_state_machine_arn
    try:
        execution_arn = stepfunctions.start_execution(
            stateMachineArn=state_machine,
            name=operation.operation_id,
            input=workflow_input.model_dump_json(by_alias=True),
        )["executionArn"]
    except ClientError as exc:
        if error_code(exc) != "ExecutionAlreadyExists":
            _fail_unstarted(
                operation,
                exc,
                node_fault_at=node.last_fault_at if node else None,
                healing=healing,
                events=events,
                now=now,
            )
        execution_arn = (
            f"{state_machine.replace(':stateMachine:', ':execution:', 1)}:{operation.operation_id}"
        )
    healing.set_execution_arn(operation.operation_id, execution_arn)
    logger.info(
        "node repair started",
        cluster=request.cluster_name,
        node=request.node_id,
        action=request.action.value,
        trigger=request.trigger.value,
        operation_id=operation.operation_id,
    )
    return operation.model_copy(update={"execution_arn": execution_arn})


def _fail_unstarted(
    operation: Operation,
    exc: ClientError,
    *,
    node_fault_at: datetime | None,
    healing: HealingTable,
    events: EventBridgeClient,
    now: datetime,
) -> NoReturn:
    logger.exception("repair workflow did not start", operation_id=operation.operation_id)
    error = OperationError(error=f"StepFunctions.{error_code(exc)}", cause=str(exc))
    healing.fail_unstarted_repair(operation, error, previous_fault_at=node_fault_at, now=now)
    emit_operation_failed(operation, error, client=events)
    raise WorkflowStartError("the repair workflow could not be started", operation.operation_id) from exc
