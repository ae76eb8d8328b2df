"""Autopilot's records: clusters, operations and their history, as the state table holds them.

Field names are the table's attribute names (camelCase aliases); the Step Functions workflows write
the same attributes (statemachines/), so renaming one here means renaming it there.

Times are ``datetime`` (UTC, to the millisecond: ``Time``); the table holds them as ISO text
(``iso``: "2026-11-22T12:15:00.000Z"), the spelling the workflows' ``$states.context`` times and
``$now()`` have too, so stored times compare as strings in time order. The text is made and read at
the edge only: a JSON dump (the DAL's ``record_values``, the API) writes it, validation reads it.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, field_validator
from pydantic.alias_generators import to_camel


class OperationType(StrEnum):
    CREATE_CLUSTER = "CreateCluster"
    DELETE_CLUSTER = "DeleteCluster"
    # A node repair (reboot and/or replace, or HyperPod's own repair observed): ReplaceNodeStateMachine.
    REPLACE_NODE = "ReplaceNode"
    # Budget enforcement: worker groups scaled down to their minimum (UpdateCluster).
    SCALE_TO_MIN = "ScaleToMin"
    # An instance group's count set through PUT /clusters/{name}/instance-groups/{group} (UpdateCluster).
    SCALE_INSTANCE_GROUP = "ScaleInstanceGroup"


class OperationStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class ClusterStatus(StrEnum):
    """Autopilot's view of a cluster's lifecycle (SageMaker's own ClusterStatus is kept beside it)."""

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    CREATE_FAILED = "CREATE_FAILED"
    DELETING = "DELETING"
    DELETED = "DELETED"
    DELETE_FAILED = "DELETE_FAILED"


# A new cluster may take a name whose previous holder is gone (deleted, or failed and rolled back).
REUSABLE_NAME_STATUSES = (ClusterStatus.DELETED, ClusterStatus.CREATE_FAILED)
# A cleanup may start when no other operation is running on the cluster.
DELETABLE_STATUSES = (ClusterStatus.ACTIVE, ClusterStatus.CREATE_FAILED, ClusterStatus.DELETE_FAILED)


def iso(moment: datetime) -> str:
    """One spelling of a time in the table (ms, UTC, "Z"): times compared as strings order correctly."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_ms(moment: datetime) -> datetime:
    """A time as records hold it: UTC, to the millisecond the table keeps, so that a record read back
    equals the one written. A time without a zone is UTC (every time Autopilot or a workflow writes is)."""
    utc = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond // 1000 * 1000)


# A record's (or the API's) time: a datetime in Python, ``iso`` text in JSON (the table, the API).
Time = Annotated[datetime, AfterValidator(utc_ms), PlainSerializer(iso, return_type=str, when_used="json")]


class _Item(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class Step(_Item):
    """One workflow step as the state machine recorded it (``$$.State.EnteredTime``)."""

    name: str
    entered_at: Time


class OperationError(_Item):
    error: str
    cause: str


class DiagnosisConfidence(StrEnum):
    HIGH = "high"  # a catalog pattern matched a log line, the FailureMessage or a cluster event
    LOW = "low"  # nothing matched (category unknown), or HyperPod wrote no lifecycle log


class Evidence(_Item):
    """One line a diagnosis rests on: a lifecycle-log line with its stream, or ``FailureMessage`` /
    ``ClusterEvent`` for SageMaker's own words."""

    stream: str
    line: str


class Diagnosis(_Item):
    """Why a create or a node launch failed, read from HyperPod's lifecycle logs against the catalog
    (autopilot/diagnosis/catalog.json; docs/operations.md, "Failure diagnosis")."""

    category: str
    summary: str
    fix: str
    evidence: list[Evidence] = Field(default_factory=list)
    confidence: DiagnosisConfidence


class RepairTrigger(StrEnum):
    """What started a repair: a Node Health event, the sweep, or an operator through the API."""

    EVENT = "event"
    SWEEP = "sweep"
    API = "api"


class RepairActor(StrEnum):
    """Who repairs the node: Autopilot (NodeRecovery None) or HyperPod itself (NodeRecovery Automatic)."""

    AUTOPILOT = "autopilot"
    HYPERPOD = "hyperpod"


class NodeAction(StrEnum):
    """One step of a repair (docs/operations.md, "Healing policy")."""

    REBOOT = "reboot"
    REPLACE = "replace"
    # HyperPod repairs the node itself; Autopilot waits and steps in past HyperPodRepairDeadlineMinutes.
    OBSERVE = "observe"
    # Nothing may be done to the node (a Slurm controller): recorded and announced on the alerts topic.
    ALERT = "alert"
    # The steps around a reboot / replace on a Slurm cluster whose agent is connected (never a decision
    # of the healing policy: the ReplaceNode workflow records them in the operation's actions).
    DRAIN = "drain"
    AWAIT_JOBS = "await-jobs"
    REQUEUE = "requeue"
    RESUME = "resume"
    # A replaced login node's successor registered in the cluster's login target groups (issue 25).
    REGISTER_TARGETS = "register-targets"


class ActionResult(StrEnum):
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    # HyperPod refused the call for this node (InvalidInstanceStatus).
    REFUSED = "refused"
    TIMED_OUT = "timed-out"
    # Not done by choice (RequeueJobsOnRepair false: the jobs left end with the repair).
    SKIPPED = "skipped"


class Fault(_Item):
    """The fault a repair answers, from the Node Health event's HealthSummary (or the sweep's view)."""

    # The HMA fault type named in HealthStatusReason ("... detected fault type X ..."), if any.
    fault_type: str | None = None
    reason: str | None = None
    # HyperPod's own RepairAction: what HyperPod itself will do ("None" when NodeRecovery is None).
    repair_action: str | None = None
    recommendation: str | None = None
    detected_at: Time


class RepairAction(_Item):
    """One action a repair took and how it ended (the ReplaceNode workflow appends them)."""

    action: NodeAction
    at: Time
    result: ActionResult
    error_code: str | None = None
    message: str | None = None
    successor_node_id: str | None = None


class Operation(_Item):
    operation_id: str
    operation_type: OperationType
    cluster_name: str
    status: OperationStatus
    created_at: Time
    updated_at: Time
    requested_by: str | None = None
    # The Idempotency-Key request that made it (autopilot.idempotency.request_marker): a retry whose
    # first attempt failed after recording it is answered this operation.
    idempotency: str | None = None
    execution_arn: str | None = None
    steps: list[Step] = Field(default_factory=list)
    error: OperationError | None = None
    # Cleanup: resources still tagged with the cluster after it was deleted.
    leftovers: list[str] | None = None
    # CreateCluster: the cluster's ARN once SageMaker returned it, and whether a failure deleted it.
    cluster_arn: str | None = None
    rolled_back: bool | None = None
    # What went wrong without failing the operation (e.g. cost tags not applied after InService).
    warnings: list[str] | None = None
    # A failed create: why, from HyperPod's lifecycle logs (Create workflow, DiagnoseFailureFunction).
    diagnosis: Diagnosis | None = None
    # ReplaceNode: the faulty instance, what started the repair, the fault, who repairs, each action
    # taken, and the new instance a replace brought.
    node_id: str | None = None
    trigger: RepairTrigger | None = None
    fault: Fault | None = None
    actor: RepairActor | None = None
    actions: list[RepairAction] | None = None
    successor_node_id: str | None = None
    # ScaleInstanceGroup: the group and the count asked (the launch watcher's reference when the
    # UpdateCluster ends: logic/launch_watch.py).
    instance_group: str | None = None
    instance_count: int | None = None

    @field_validator("leftovers", mode="before")
    @classmethod
    def _parse_leftovers(cls, value: Any) -> Any:
        # The Cleanup workflow stores the list as JSON text (ASL cannot build a DynamoDB list of strings).
        return json.loads(value) if isinstance(value, str) else value


class Cluster(_Item):
    cluster_name: str
    status: ClusterStatus
    created_at: Time
    updated_at: Time
    last_operation_id: str
    owner: str | None = None
    project: str | None = None
    cluster_arn: str | None = None
    budget_name: str | None = None
    # The budget's monthly limit in USD ("2500.00", as CreateBudget got it): the spend meter's reference.
    budget_limit_usd: str | None = None
    # The `cost-center` cost tag, and the FSx file systems its provisioning parameters name (both
    # tagged by CostTaggerFunction, as the cluster, its lifecycle bucket and its security groups).
    cost_center: str | None = None
    file_system_ids: list[str] | None = None
    # The IAM identity ARN that created it through the API: it (and the admins) may delete it.
    created_by: str | None = None
    # The identities the create request named (``owners``) who may act on it as its creator may.
    owners: list[str] | None = None
    # SageMaker's ClusterStatus as last seen by a workflow or a HyperPod event.
    sagemaker_status: str | None = None
    # Budget enforcement at 100 % ACTUAL ("alert" | "scale-to-min" | "block-growth"), and the instance
    # groups scale-to-min may shrink (neither the Slurm controller nor the login group), both from the
    # create request (logic/budget_enforcement.py).
    budget_enforcement: str | None = None
    worker_groups: list[str] | None = None
    # block-growth: scale-ups are refused until this time (the next budget period) unless lifted.
    growth_blocked_until: Time | None = None
    growth_blocked_at: Time | None = None
    growth_blocked_by: str | None = None
    # The project budget this create asked for ("9000.00" USD, its e-mails): the project's first live
    # cluster that asked holds the budget's terms, its creator owns them (logic/project_budget.py).
    project_budget_limit_usd: str | None = None
    project_budget_emails: list[str] | None = None
    # The ELBv2 target groups that hold the login group's node IPs (logic/login_targets.py).
    login_target_group_arns: list[str] | None = None
    # Department budgets: USD a month per Slurm account ("5000.00"), alerted at 50/80/100 % of the
    # account's jobs' cost (logic/account_budget_alerts.py; PUT /clusters/{name}/account-budgets).
    account_budgets: dict[str, str] | None = None


class NodeHealth(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


class NodeRecord(_Item):
    """A node Autopilot heard of (a Node Health event, the sweep, an API repair): dal/healing.py."""

    cluster_name: str
    node_id: str
    health: NodeHealth | None = None
    health_reason: str | None = None
    # The event time of the health report held (older reports change nothing).
    health_since: Time | None = None
    # The event time of the last fault a repair was claimed for (a fault at or before it is a duplicate).
    last_fault_at: Time | None = None
    # The operation id of the repair in flight; removed when it ends.
    open_repair: str | None = None
    instance_group: str | None = None


class HealingState(_Item):
    """A cluster's healing switch, breaker and repair leases (dal/healing.py; the ASL leases slots)."""

    cluster_name: str
    paused: bool = False
    paused_reason: str | None = None
    paused_at: Time | None = None
    # "breaker", or the principal ARN that paused it through the API.
    paused_by: str | None = None
    tripped_at: Time | None = None
    resumed_at: Time | None = None
    resumed_by: str | None = None
    # node id -> the time of its latest Unhealthy report inside the breaker window
    unhealthy_reports: dict[str, Time] = Field(default_factory=dict)
    # operation ids holding a repair slot (MaxConcurrentRepairs)
    lease_holders: set[str] = Field(default_factory=set)
    # bumped by every write of the breaker, which is conditioned on it
    version: int = 0
    # the breaker's trip whose alert is not sent yet (set with the trip, removed by its one sender)
    trip_alert_pending: bool = False


class HistoryEntry(_Item):
    cluster_name: str
    at: Time
    operation_id: str
    operation_type: OperationType
    requested_by: str | None = None


class Page[T](BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[T]
    next_token: str | None = None


def new_operation_id(now: datetime) -> str:
    """Time-ordered (``now``: the use case's one reading of the clock), unique, and valid as a Step
    Functions execution name."""
    return f"op-{now.astimezone(UTC).strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
