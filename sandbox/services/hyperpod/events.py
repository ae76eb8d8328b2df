"""The events the HyperPod simulator sends: EventBridge's State Change, Node Health and Cluster Event
details, queued for delivery after the change (maybe twice) and published outside the lock, and the
Cluster Event records ListClusterEvents reads. Also ``tick()``, which advances and then publishes.
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from typing import Any

from sandbox.emulator import bus
from sandbox.services.hyperpod.model import Cluster, Node, epoch_millis
from sandbox.services.hyperpod.state import Outgoing, SimulatorState

SOURCE = "aws.sagemaker"
STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"


# Cluster event descriptions, from AWS's "SageMaker HyperPod cluster events reference" (the
# instance-creation failure and lifecycle-script wordings from its and the EventBridge page's samples).
CLUSTER_STARTED = "Cluster {cluster} {operation} started successfully"
CLUSTER_COMPLETED = "Cluster {cluster} {operation} completed successfully"
CLUSTER_FAILED = "Cluster {cluster} {operation} failed"
GROUP_COMPLETED = "Instance Group {group} {operation} in Cluster {cluster} completed successfully"
PROVISIONED = "EC2 Instance {instance} successfully provisioned in Cluster {cluster} and IG {group}"
CREATION_FAILED = "Instance creation in Cluster {cluster} and InstanceGroup {group} failed"
SCRIPT_STARTED = "Instance lifecycle script execution for EC2InstanceId {instance} has Started"
TERMINATING = (
    "Termination of EC2 Instance {instance} is currently in progress in Cluster {cluster} and IG {group}"
)
REBOOTING = "Reboot of EC2 Instance {instance} is currently in progress on Cluster {cluster} and IG {group}"
REBOOTED = "Instance reboot {instance} in Cluster {cluster} and IG {group} completed successfully"
REPLACING = (
    "Instance {instance} is starting as part of instance replacement in Cluster {cluster} and IG {group}"
)


class EventPublisher(SimulatorState):
    """Queues and publishes the simulator's events (a base of ``HyperPodSimulator``)."""

    def tick(self) -> None:
        """Advance every lifecycle to ``clock.now()`` and publish the events that fall due."""
        try:
            with self._lock:
                self._advance(self.clock.now())
        finally:
            self._publish()

    def next_due(self) -> datetime | None:
        """When the next lifecycle step or event delivery falls due (None: nothing is scheduled), so a
        driver of a frozen clock can jump straight to it (sandbox.apps.simulate)."""
        with self._lock:
            due = [self._timers[0][0]] if self._timers else []
            due += [self._outbox[0].due] if self._outbox else []
            return min(due, default=None)

    def _publish(self) -> None:
        with self._lock:
            now = max(self._now, self.clock.now())
            due: list[Outgoing] = []
            while self._outbox and self._outbox[0].due <= now:
                due.append(heapq.heappop(self._outbox))
        for event in due:
            bus.emit(
                SOURCE,
                event.detail_type,
                event.detail,
                resources=[event.resource],
                region=self.region,
                account_id=self.account_id,
                time=event.time,
            )

    def _send(self, detail_type: str, detail: dict[str, Any], cluster: Cluster, at: datetime) -> None:
        """Queue an event for delivery ``timings.event_delivery`` after ``at`` (maybe twice)."""
        delay = timedelta(seconds=self.timings.event_delivery)
        copies = 1
        if self.duplicate_events and self._duplicates.random() < self.duplicate_events:
            copies = 2
        for copy in range(copies):
            outgoing = Outgoing(
                at + delay * (copy + 1), next(self._sequence), detail_type, detail, cluster.arn, at
            )
            heapq.heappush(self._outbox, outgoing)

    def _state_change(self, cluster: Cluster, at: datetime) -> None:
        self._send(STATE_CHANGE, cluster.state_change_detail(), cluster, at)

    def _health_event(self, cluster: Cluster, node: Node, at: datetime) -> None:
        detail = {
            "ClusterName": cluster.name,
            "ClusterArn": cluster.arn,
            "InstanceId": node.instance_id,
            "Tags": dict(cluster.tags),
            "HealthSummary": {
                "HealthStatus": "Healthy" if node.healthy else "Unhealthy",
                "HealthStatusReason": node.health_reason,
                "RepairAction": reported_repair_action(node),
                "Recommendation": node.recommendation,
            },
        }
        self._send(NODE_HEALTH, detail, cluster, at)

    def _cluster_event(
        self,
        cluster: Cluster,
        at: datetime,
        description: str,
        *,
        level: str = "Info",
        group: str | None = None,
        node: Node | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Record and send a Cluster Event, which AWS has only for NodeProvisioningMode Continuous."""
        if not cluster.continuous:
            return
        record: dict[str, Any] = {
            "EventId": self._new_uuid(),
            "ClusterArn": cluster.arn,
            "ClusterName": cluster.name,
            "ResourceType": "Instance" if node else "InstanceGroup" if group else "Cluster",
            "EventTime": at,
            "EventLevel": level,
            "Description": description,
        }
        if node is not None:
            group = node.group_name
            record["InstanceId"] = node.instance_id
        if group is not None:
            record["InstanceGroupName"] = group
        if metadata:
            record["EventDetails"] = {"EventMetadata": metadata}
        self._cluster_events.setdefault(cluster.arn, []).append(record)
        detail = dict(record, EventTime=epoch_millis(at))
        self._send(CLUSTER_EVENT, {"EventDetails": detail}, cluster, at)

    def _instance_event(
        self, cluster: Cluster, node: Node, at: datetime, template: str, **options: Any
    ) -> None:
        """A Cluster Event about one instance, worded with one of AWS's description templates."""
        description = template.format(instance=node.instance_id, cluster=cluster.name, group=node.group_name)
        self._cluster_event(cluster, at, description, node=node, **options)


def reported_repair_action(node: Node) -> str:
    """A Node Health event's RepairAction: what HyperPod itself will do ("None" unless it repairs the
    node on its own, NodeRecovery Automatic), unless a fault set what the event says. AWS's sample
    shows "None" with "Please Replace the Faulty Node."; the reading of the field is ours, not AWS's."""
    if node.healthy:
        return "None"
    if node.repair_action_override is not None:
        return node.repair_action_override
    return node.needed_repair if node.auto_repair else "None"
