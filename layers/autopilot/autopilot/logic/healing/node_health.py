"""A Node Health event (ClusterEventsFunction's Node Health branch, autopilot.logic.cluster_events).

Unhealthy: the report is held on the node item (an older one than held changes nothing), counted by
the breaker, and — unless repairs are paused, a repair is open on the node or this fault was claimed
already — decided (autopilot.logic.healing.decide, HyperPod's part from the cluster's NodeRecovery) and
started (start_repair, trigger "event").
Healthy: the report is held and the repairs waiting on the node are resumed
(autopilot.workflows.node_waits); nothing starts.

Only clusters in the registry that are ACTIVE are healed: a cluster Autopilot does not manage is not
adopted by an event, and one being created or deleted belongs to its own workflow.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from autopilot import clock
from autopilot.aws import LazyClient
from autopilot.dal.healing import HealingTable
from autopilot.logic.healing.breaker import announce_trip, record_unhealthy
from autopilot.logic.healing.decide import decide, fault_type_of
from autopilot.logic.healing.start_repair import RepairRequest, start_repair
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.records import ClusterStatus, Fault, NodeHealth, RepairTrigger, iso, utc_ms
from autopilot.observability import logger
from autopilot.workflows.node_waits import node_health_changed

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.models.hyperpod_events import NodeHealthEvent
    from autopilot.settings import HealingSettings
    from autopilot.workflows.cluster_waits import ClusterWaits


class NodeHealing:
    """What the Node Health branch reaches AWS through (one per execution environment)."""

    stepfunctions: LazyClient[SFNClient] = LazyClient("stepfunctions")
    events: LazyClient[EventBridgeClient] = LazyClient("events")
    sns: LazyClient[SNSClient] = LazyClient("sns")

    def __init__(
        self,
        settings: HealingSettings,
        *,
        table: HealingTable | None = None,
        topology: TopologyReader | None = None,
        stepfunctions: SFNClient | None = None,
        events: EventBridgeClient | None = None,
        sns: SNSClient | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.table = table or HealingTable(settings.state_table_name)
        self.topology = topology or TopologyReader()
        self._stepfunctions = stepfunctions
        self._events = events
        self._sns = sns
        self.now = now or (lambda: clock.now())  # noqa: PLW0108  (read at each call: the sandbox sets it)


def node_health_reported(event: NodeHealthEvent, healing: NodeHealing, waits: ClusterWaits) -> str:
    """Handle one Node Health event; what came of it (for logs and tests)."""
    detail = event.detail
    summary = detail.HealthSummary
    cluster_name, node_id = detail.ClusterName, detail.InstanceId
    health = NodeHealth(summary.HealthStatus)
    at = utc_ms(event.time)
    log: dict[str, Any] = {
        "cluster": cluster_name,
        "node": node_id,
        "health": health.value,
        "event_time": iso(at),
    }

    cluster = healing.table.get_cluster(cluster_name)
    if cluster is None or cluster.status is not ClusterStatus.ACTIVE:
        logger.info("node health of a cluster Autopilot does not heal", **log)
        return "not-managed"
    record = healing.table.record_health(
        cluster_name, node_id, health, reason=summary.HealthStatusReason, at=at
    )
    if record is None:
        logger.info("older node health report ignored", **log)
        return "out-of-order"
    node_health_changed(cluster_name, node_id, health, waits)
    if health is NodeHealth.HEALTHY:
        logger.info("node healthy", **log)
        return "healthy"
    if record.open_repair is not None or (record.last_fault_at is not None and record.last_fault_at >= at):
        logger.info("fault already claimed", open_repair=record.open_repair, **log)
        return "duplicate"

    topology = healing.topology.cluster(cluster_name)
    if topology is None:
        logger.info("node health of a cluster SageMaker no longer has", **log)
        return "cluster-gone"
    group = record.instance_group or healing.topology.node_group(cluster_name, node_id)
    if group is None:
        logger.info("node health of a node SageMaker no longer has", **log)
        return "node-gone"
    breaker = record_unhealthy(
        healing.table,
        cluster_name,
        node_id,
        at=event.time,
        node_count=topology.node_count,
        settings=healing.settings,
    )
    announce_trip(
        breaker, table=healing.table, settings=healing.settings, sns=healing.sns, events=healing.events
    )
    if breaker.state.paused:
        # The node item keeps health=Unhealthy: the sweep finds the node once repairs resume.
        logger.warning("repairs paused: none started", paused_by=breaker.state.paused_by, **log)
        return "paused"

    fault = Fault(
        fault_type=fault_type_of(summary.HealthStatusReason),
        reason=summary.HealthStatusReason,
        repair_action=summary.RepairAction,
        recommendation=summary.Recommendation,
        detected_at=at,
    )
    # Who repairs comes from the cluster's NodeRecovery (the DescribeCluster just read), not from the
    # event's RepairAction, which AWS leaves undefined (logic/healing/decide.py).
    decision = decide(
        fault,
        topology.role(group),
        hyperpod_repairs=topology.automatic_recovery,
        allow_login_replace=healing.settings.allow_login_replace,
    )
    logger.info("node repair decided", action=decision.action.value, why=decision.why, group=group, **log)
    operation = start_repair(
        RepairRequest(
            cluster_name=cluster_name,
            node_id=node_id,
            action=decision.action,
            trigger=RepairTrigger.EVENT,
            fault=fault,
            actor=decision.actor,
            instance_group=group,
            allow_replace=decision.allow_replace,
            deep_health_checks=topology.deep_health_checks(group),
        ),
        healing=healing.table,
        stepfunctions=healing.stepfunctions,
        events=healing.events,
        settings=healing.settings,
        # Never before the event: a clock behind HyperPod's (the sandbox runs its own, ahead of the
        # wall) would make the repair look older than it is to the sweep's deadlines.
        now=max(event.time, healing.now()),
    )
    return "started" if operation is not None else "duplicate"
