"""What the HyperPod simulator tells an orchestrator running on its instances (sandbox/services/slurm/).

The simulator calls these under its lock, at the moment an instance changes: an implementation copies
what it needs and returns at once (real work happens on its own threads). Without hooks
(``HyperPodSimulator.hooks is None``, the default) the simulator behaves exactly as before.
"""

from __future__ import annotations

from typing import Protocol

from sandbox.services.hyperpod.model import Cluster, Node


class InstanceHooks(Protocol):
    def instance_running(self, cluster: Cluster, node: Node, *, rebooted: bool) -> None:
        """The instance is Running: launched (its lifecycle scripts done), or back from a reboot."""

    def instance_stopped(self, cluster: Cluster, node: Node) -> None:
        """The instance stopped answering: it failed, is rebooting or is shutting down."""

    def instance_terminated(self, cluster: Cluster, node: Node) -> None:
        """The instance is gone (replaced, deleted, scaled down)."""

    def cluster_deleted(self, cluster: Cluster) -> None:
        """DeleteCluster: every instance is shutting down."""
