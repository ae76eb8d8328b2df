"""Autopilot's records: clusters, operations and their history, as the state table holds them.

Field names are the table's attribute names (camelCase aliases); the Step Functions workflows write
the same attributes (statemachines/), so renaming one here means renaming it there.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel


class OperationType(StrEnum):
    CREATE_CLUSTER = "CreateCluster"
    DELETE_CLUSTER = "DeleteCluster"


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


class _Item(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class Step(_Item):
    """One workflow step as the state machine recorded it (``$$.State.EnteredTime``)."""

    name: str
    entered_at: str


class OperationError(_Item):
    error: str
    cause: str


class Operation(_Item):
    operation_id: str
    operation_type: OperationType
    cluster_name: str
    status: OperationStatus
    created_at: str
    updated_at: str
    requested_by: str | None = None
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

    @field_validator("leftovers", mode="before")
    @classmethod
    def _parse_leftovers(cls, value: Any) -> Any:
        # The Cleanup workflow stores the list as JSON text (ASL cannot build a DynamoDB list of strings).
        return json.loads(value) if isinstance(value, str) else value


class Cluster(_Item):
    cluster_name: str
    status: ClusterStatus
    created_at: str
    updated_at: str
    last_operation_id: str
    owner: str | None = None
    project: str | None = None
    cluster_arn: str | None = None
    budget_name: str | None = None
    # The IAM identity ARN that created it through the API: it (and the admins) may delete it.
    created_by: str | None = None
    # SageMaker's ClusterStatus as last seen by a workflow or a HyperPod event.
    sagemaker_status: str | None = None


class HistoryEntry(_Item):
    cluster_name: str
    at: str
    operation_id: str
    operation_type: OperationType
    requested_by: str | None = None


class Page[T](BaseModel):
    items: list[T]
    next_token: str | None = None


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_operation_id(now: datetime | None = None) -> str:
    """Time-ordered, unique, and valid as a Step Functions execution name."""
    moment = now or datetime.now(UTC)
    return f"op-{moment.strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(4)}"
