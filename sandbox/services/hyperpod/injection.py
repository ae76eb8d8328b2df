"""Fault injection into the HyperPod simulator (the admin route's and CLI's ``apply_fault``): a node
HMA finds unhealthy, a reboot that does not heal, capacity shortfalls, a cluster that needs a software
update, lifecycle-script failures. The faults themselves are described in faults.py and
lifecycle_logs.py; this module arms them on a simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandbox.services.hyperpod import lifecycle_logs
from sandbox.services.hyperpod.cluster_lifecycle import ClusterLifecycle
from sandbox.services.hyperpod.events import reported_repair_action
from sandbox.services.hyperpod.faults import CapacityFault, health_fault
from sandbox.services.hyperpod.model import Node
from sandbox.services.hyperpod.node_lifecycle import TAKES_REPAIR
from sandbox.services.hyperpod.validation import HyperPodApiError

_REPAIR_ACTIONS = ("None", "Reboot", "Replace")  # the RepairAction values sent (AWS documents none)


class FaultInjection(ClusterLifecycle):
    """Arms and clears faults (a base of ``HyperPodSimulator``)."""

    def apply_fault(self, name: str, params: dict[str, Any]) -> dict[str, Any]:
        """Inject a fault by name (the admin route / CLI entry point). Raises ValueError on bad input."""
        faults: dict[str, Callable[..., dict[str, Any]]] = {
            "node_unhealthy": self.fault_node_unhealthy,
            "reboot_does_not_heal": self.fault_reboot_does_not_heal,
            "capacity": self.fault_capacity,
            "software_update_required": self.fault_software_update_required,
            "lifecycle_failure": self.fault_lifecycle_failure,
            "clear": self.clear_faults,
        }
        fault = faults.get(name)
        if fault is None:
            raise ValueError(f"unknown fault {name!r}; known: {', '.join(sorted(faults))}")
        try:
            return fault(**params)
        except TypeError as error:  # a missing or unexpected parameter
            raise ValueError(f"bad parameters for fault {name!r}: {error}") from None

    def fault_node_unhealthy(
        self,
        cluster: str,
        node_id: str | None = None,
        fault_type: str = "NvidiaErrorTerminate",
        instance_status: str = "Running",
        auto_recover: bool | None = None,
        *,
        repair_action: str | None = None,
    ) -> dict[str, Any]:
        """HMA finds a fault on a node: the Node Health Event fires; NodeRecovery=Automatic repairs it.

        ``repair_action`` ("None" | "Reboot" | "Replace") is what the event says as RepairAction, whoever
        repairs; by default the repair HyperPod makes ("None" when it makes none), except for the
        simulator's seeded ``repair_action_none`` share of faults on Automatic clusters.

        The instance itself usually keeps running (``instance_status="Running"``; HMA's verdict lives
        in the orchestrator: Slurm drains the node, EKS labels it UnschedulablePendingReplacement);
        ``instance_status="Failure"`` models a fault that takes the instance down.
        """
        fault = health_fault(fault_type)
        if instance_status not in TAKES_REPAIR:
            raise ValueError("instance_status must be Running or Failure")
        if repair_action not in (None, *_REPAIR_ACTIONS):
            raise ValueError(f"repair_action must be one of {', '.join(_REPAIR_ACTIONS)}")
        try:
            with self._lock:
                self._advance(self.clock.now())
                at = self._now
                target = self._fault_target(cluster, node_id)
                target_cluster = self._cluster(cluster)
                target.healthy = False
                target.fault_type = fault.fault_type
                target.health_reason = fault.health_status_reason()
                target.needed_repair = fault.repair_action
                target.recommendation = fault.recommendation
                target.auto_repair = (
                    target_cluster.node_recovery == "Automatic" if auto_recover is None else auto_recover
                )
                target.repair_action_override = repair_action
                if (
                    repair_action is None
                    and target.auto_repair
                    and self.repair_action_none
                    and self._repair_actions.random() < self.repair_action_none
                ):
                    target.repair_action_override = "None"
                target.status = target.resting_status = instance_status
                target.message = fault.reason if instance_status == "Failure" else ""
                if self.hooks is not None and instance_status == "Failure":  # the instance went down
                    self.hooks.instance_stopped(target_cluster, target)
                self._health_event(target_cluster, target, at)
                if target.auto_repair:
                    self._schedule_auto_repair(target_cluster, target, at)
                return {
                    "ClusterArn": target_cluster.arn,
                    "ClusterName": target_cluster.name,
                    "InstanceId": target.instance_id,
                    "HealthStatus": "Unhealthy",
                    "HealthStatusReason": target.health_reason,
                    "RepairAction": reported_repair_action(target),
                    "Recommendation": target.recommendation,
                    "AutoRecovery": target.auto_repair,
                }
        finally:
            self._publish()

    def _fault_target(self, cluster_name: str, node_id: str | None) -> Node:
        try:
            cluster = self._cluster(cluster_name)
        except HyperPodApiError as error:
            raise ValueError(error.message) from None
        if node_id is None:
            candidates = [
                n
                for n in sorted(cluster.nodes.values(), key=lambda n: (n.group_name, n.launch_time))
                if n.group_name not in cluster.controller_groups and n.operation is None and n.healthy
            ]
            if not candidates:
                raise ValueError(f"cluster {cluster_name} has no healthy, idle worker node")
            return candidates[0]
        node = cluster.nodes.get(node_id)
        if node is None:
            raise ValueError(f"node {node_id} not found in cluster {cluster_name}")
        if node.operation is not None:
            raise ValueError(f"node {node_id} is {node.status}; only an idle node can take a fault")
        return node

    def fault_reboot_does_not_heal(self, cluster: str, node_id: str) -> dict[str, Any]:
        """The next reboot of this node leaves it unhealthy (HMA asks for a replacement instead)."""
        with self._lock:
            self._advance(self.clock.now())
            node = self._cluster_node_for_fault(cluster, node_id)
            node.reboot_heals = False
            return {"ClusterName": cluster, "InstanceId": node_id, "RebootHeals": False}

    def _cluster_node_for_fault(self, cluster_name: str, node_id: str) -> Node:
        try:
            cluster = self._cluster(cluster_name)
        except HyperPodApiError as error:
            raise ValueError(error.message) from None
        node = cluster.nodes.get(node_id)
        if node is None:
            raise ValueError(f"node {node_id} not found in cluster {cluster_name}")
        return node

    def fault_capacity(
        self,
        instance_type: str | None = None,
        operation: str = "CreateCluster",
        times: int = 1,
        available: int = 0,
    ) -> dict[str, Any]:
        """The next ``times`` CreateCluster (or UpdateCluster scale-up) calls find no capacity; on a
        Continuous cluster, the next ``times`` launch rounds find ``available`` instances per group."""
        if operation not in ("CreateCluster", "UpdateCluster"):
            raise ValueError("operation must be CreateCluster or UpdateCluster")
        if times < 1:
            raise ValueError("times must be >= 1")
        if available < 0:
            raise ValueError("available must be >= 0")
        with self._lock:
            self._capacity_faults.append(CapacityFault(operation, instance_type, times, available))
        return {"Operation": operation, "InstanceType": instance_type, "Times": times, "Available": available}

    def fault_software_update_required(self, cluster: str) -> dict[str, Any]:
        """The cluster predates the Batch* node APIs: BatchReplaceClusterNodes is refused until an
        UpdateClusterSoftware on it completes (as AWS documents for clusters created before them)."""
        with self._lock:
            self._advance(self.clock.now())
            try:
                target = self._cluster(cluster)
            except HyperPodApiError as error:
                raise ValueError(error.message) from None
            target.needs_software_update = True
            return {"ClusterName": cluster, "NeedsSoftwareUpdate": True}

    def fault_lifecycle_failure(
        self,
        cluster: str | None = None,
        group: str | None = None,
        lines: list[str] | None = None,
        failure_message: str | None = None,
        category: str | None = None,
    ) -> dict[str, Any]:
        """The next launch in ``group`` (any) of ``cluster`` (any, when None) fails in its lifecycle
        scripts: ``lines`` (or the catalog's example lines of ``category``) end that instance's stream,
        and ``failure_message`` (else SageMaker's usual one) is the cluster's FailureMessage (a create
        fails whole) or the instance's status message (a replacement or scale-up stays in Failure)."""
        fault = lifecycle_logs.lifecycle_failure(
            cluster=cluster, group=group, lines=lines, failure_message=failure_message, category=category
        )
        with self._lock:
            self._lifecycle_failures.append(fault)
        return {"Cluster": cluster, "Group": group, "Lines": list(fault.lines)}

    def clear_faults(self) -> dict[str, Any]:
        """Disarm capacity and lifecycle faults and every node's reboot-does-not-heal flag."""
        with self._lock:
            self._capacity_faults.clear()
            self._lifecycle_failures.clear()
            for cluster in self._clusters.values():
                cluster.needs_software_update = False
                for node in cluster.nodes.values():
                    node.reboot_heals = True
        return {"Cleared": True}
