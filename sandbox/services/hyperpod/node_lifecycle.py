"""Node lifecycles in the HyperPod simulator: a launched instance coming up (lifecycle scripts, deep
health checks), reboot, replace, removal, a moved node's hand-off, and the repair HyperPod makes on
its own (NodeRecovery Automatic). Each step is a timer on the simulator's clock.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from sandbox.services.hyperpod import lifecycle_logs
from sandbox.services.hyperpod.events import (
    PROVISIONED,
    REBOOTED,
    REBOOTING,
    REPLACING,
    SCRIPT_STARTED,
    TERMINATING,
    EventPublisher,
)
from sandbox.services.hyperpod.model import Cluster, InstanceGroup, Node
from sandbox.services.hyperpod.state import Action

TAKES_REPAIR = frozenset({"Running", "Failure"})


class NodeLifecycle(EventPublisher):
    """Launch, reboot, replace, remove and move nodes on the clock (a base of ``HyperPodSimulator``)."""

    def _launch_failed_in_scripts(self, cluster: Cluster, node: Node, at: datetime) -> bool:
        """A launch after the create (a replacement, a scale-up) that an armed lifecycle_failure fault
        covers: its scripts fail, the instance stays in Failure with the fault's message (unverified:
        docs/sandbox.md). A classic create fails whole (_lifecycle_failed); Continuous is not simulated."""
        if cluster.continuous or cluster.status == "Creating":
            return False
        fault = next((f for f in self._lifecycle_failures if f.covers(cluster.name, node.group_name)), None)
        if fault is None:
            return False
        self._lifecycle_failures.remove(fault)
        self._write_lifecycle_log(cluster, node, at, [*lifecycle_logs.STARTED_LINES, *fault.lines])
        node.status, node.operation, node.message = "Failure", None, fault.message(node.instance_id)
        return True

    def _write_lifecycle_log(
        self, cluster: Cluster, node: Node, at: datetime, lines: tuple[str, ...] | list[str]
    ) -> None:
        lifecycle_logs.write_stream(
            self.account_id,
            self.region,
            cluster_name=cluster.name,
            cluster_id=cluster.cluster_id,
            group=node.group_name,
            instance_id=node.instance_id,
            at=at,
            lines=lines,
        )

    def _hand_off(
        self, source: Cluster, node: Node, target: Cluster, group: InstanceGroup, at: datetime
    ) -> None:
        """A moving node leaves its group (and cluster) and joins the target group, AttachInProgress."""
        if not self._node_alive(source, node, "move") or self._clusters.get(target.arn) is not target:
            return
        del source.nodes[node.instance_id]
        source.groups[node.group_name].target_count -= 1
        node.group_name, node.status = group.name, "AttachInProgress"
        target.nodes[node.instance_id] = node
        group.target_count += 1
        self._after(at, self.timings.move_attach, partial(self._attached, target, node))

    def _attached(self, cluster: Cluster, node: Node, at: datetime) -> None:
        if self._node_alive(cluster, node, "move"):
            node.status, node.operation = "Running", None

    def _start_reboot(self, cluster: Cluster, node: Node, at: datetime) -> None:
        self.node_repairs[(cluster.name, node.instance_id, "reboot")] += 1
        node.status, node.operation, node.message = "Pending", "reboot", "Rebooting the instance."
        self._instance_event(cluster, node, at, REBOOTING)
        if self.hooks is not None:
            self.hooks.instance_stopped(cluster, node)
        self._after(at, self.timings.reboot_node, lambda t: self._finish_reboot(cluster, node, t))

    def _finish_reboot(self, cluster: Cluster, node: Node, at: datetime) -> None:
        if not self._node_alive(cluster, node, "reboot"):
            return
        node.operation, node.message = None, ""
        was_unhealthy = not node.healthy
        self._instance_event(cluster, node, at, REBOOTED)
        if was_unhealthy and not node.reboot_heals:
            node.reboot_heals = True  # the fault covers one reboot
            node.needed_repair = "Replace"
            node.recommendation = "Please Replace the Faulty Node."
            node.status = node.resting_status
            node.message = node.health_reason if node.resting_status == "Failure" else ""
            if self.hooks is not None and node.status == "Running":  # back up, still unhealthy
                self.hooks.instance_running(cluster, node, rebooted=True)
            self._health_event(cluster, node, at)
            if node.auto_repair:
                self._schedule_auto_repair(cluster, node, at)
            return
        _heal(node)
        node.status = "Running"
        if self.hooks is not None:
            self.hooks.instance_running(cluster, node, rebooted=True)
        if was_unhealthy:
            self._health_event(cluster, node, at)

    def _start_replace(self, cluster: Cluster, node: Node, at: datetime) -> None:
        self.node_repairs[(cluster.name, node.instance_id, "replace")] += 1
        group = cluster.groups[node.group_name]
        successor = self._new_node(cluster, group, at)
        node.status, node.operation, node.replaced_by = "ShuttingDown", "replace", successor.instance_id
        node.message = f"Replaced by {successor.instance_id}."
        self._instance_event(cluster, node, at, TERMINATING)
        if self.hooks is not None:
            self.hooks.instance_stopped(cluster, node)
        self._instance_event(cluster, successor, at, REPLACING)
        self._after(at, self.timings.shutdown_node, lambda t: self._remove_node(cluster, node, "replace"))
        self._after(at, self.timings.replace_node, lambda t: self._finish_launch(cluster, successor, t))

    def _finish_launch(self, cluster: Cluster, node: Node, at: datetime) -> None:
        if self._node_alive(cluster, node, "launch"):
            self._bring_up(cluster, node, at)

    def _bring_up(self, cluster: Cluster, node: Node, at: datetime) -> None:
        """A launched instance is up: Running, or first DeepHealthCheckInProgress when its group asks
        for OnStartDeepHealthChecks."""
        if node.operation != "launch" or self._launch_failed_in_scripts(cluster, node, at):
            return
        node.provisioned = True
        self._write_lifecycle_log(cluster, node, at, lifecycle_logs.HEALTHY_LINES)
        self._instance_event(cluster, node, at, PROVISIONED)
        self._instance_event(
            cluster, node, at, SCRIPT_STARTED, metadata={"Instance": {"LcsExecutionState": "Started"}}
        )
        group = cluster.groups.get(node.group_name)
        if group is not None and group.spec.get("OnStartDeepHealthChecks"):
            node.status, node.operation = "DeepHealthCheckInProgress", "deep_health_check"
            self._after(
                at, self.timings.deep_health_check, lambda t: self._finish_deep_health_check(cluster, node)
            )
        else:
            node.status, node.operation = "Running", None
            if self.hooks is not None:
                self.hooks.instance_running(cluster, node, rebooted=False)

    def _waiting_for_deep_health_checks(self, cluster: Cluster, at: datetime, then: Action) -> bool:
        """Deep health checks run as part of a create / scale-up (AWS's docs): while new instances
        are still checked, the operation waits and ``then`` runs again when they are done."""
        if not any(n.operation == "deep_health_check" for n in cluster.nodes.values()):
            return False
        self._after(at, self.timings.deep_health_check, then)
        return True

    def _finish_deep_health_check(self, cluster: Cluster, node: Node) -> None:
        if self._node_alive(cluster, node, "deep_health_check"):
            node.status, node.operation = "Running", None
            if self.hooks is not None:
                self.hooks.instance_running(cluster, node, rebooted=False)

    def _remove_node(self, cluster: Cluster, node: Node, operation: str) -> None:
        if self._node_alive(cluster, node, operation):
            del cluster.nodes[node.instance_id]
            if self.hooks is not None:
                self.hooks.instance_terminated(cluster, node)

    def _schedule_removal(self, cluster: Cluster, node: Node, at: datetime) -> None:
        self._after(at, self.timings.scale_down, lambda t: self._remove_node(cluster, node, "shutdown"))

    def _schedule_auto_repair(self, cluster: Cluster, node: Node, at: datetime) -> None:
        """NodeRecovery Automatic: HyperPod reboots or replaces the node itself, a little later."""
        self._after(at, self.timings.auto_recovery_delay, lambda t: self._auto_repair(cluster, node, t))

    def _auto_repair(self, cluster: Cluster, node: Node, at: datetime) -> None:
        alive = self._clusters.get(cluster.arn) is cluster and cluster.nodes.get(node.instance_id) is node
        if not alive or node.operation is not None or node.healthy:
            return
        if node.needed_repair == "Replace" and node.group_name not in cluster.controller_groups:
            self._start_replace(cluster, node, at)
        else:
            self._start_reboot(cluster, node, at)


def _heal(node: Node) -> None:
    node.healthy, node.fault_type = True, None
    node.health_reason = node.needed_repair = node.recommendation = ""
    node.auto_repair = False
    node.repair_action_override = None
    node.resting_status = "Running"
