"""A node Autopilot heard of and a cluster's healing state (dal/healing.py), as the state table holds them."""

from __future__ import annotations

from pydantic import Field

from autopilot.models.records.base import NodeHealth, RecordModel, Time


class NodeRecord(RecordModel):
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


class HealingState(RecordModel):
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
