"""What every record shares: the base model (the table's camelCase names), times (``Time``, ``iso``) and
the enums the records' fields take. No record model here: importing this module creates one class."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainSerializer
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


class DiagnosisConfidence(StrEnum):
    HIGH = "high"  # a catalog pattern matched a log line, the FailureMessage or a cluster event
    LOW = "low"  # nothing matched (category unknown), or HyperPod wrote no lifecycle log


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


class NodeHealth(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


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


class RecordModel(BaseModel):
    """A record's model: attributes by their camelCase names, unknown ones ignored, built on first use."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


def new_operation_id(now: datetime) -> str:
    """Time-ordered (``now``: the use case's one reading of the clock), unique, and valid as a Step
    Functions execution name."""
    return f"op-{now.astimezone(UTC).strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
