"""Real Slurm under the HyperPod simulator: its instance hooks (sandbox/services/hyperpod/hooks.py) drive one
``SlurmCluster`` per Slurm cluster, and the agent where a cluster installs it.

What each HyperPod change does to Slurm (docs/sandbox.md, "Real Slurm"):
- the controller node is Running → the cluster's slurmctld starts (Slurm clusters only: not EKS); at its
  launch (not after a reboot: lifecycle scripts run once) the controller group's lifecycle scripts install
  the agent if they hold ``autopilot-agent/install.sh`` then (sandbox/services/slurm/agent.py), and the
  installed agent
  starts, at launch and after every reboot (systemd); the controller stops answering → its agent stops;
- a worker (not a controller or login group) is Running → its slurmd starts, named as HyperPod names
  Slurm nodes (the first label of PrivateDnsHostname), its GPUs the instance type's;
- an instance stops answering (failed, rebooting, shutting down) → its slurmd and its jobs' processes
  die; back from a reboot → slurmd restarts reporting the reboot; terminated → out of slurm.conf;
- DeleteCluster → the daemons and the agent stop.
The simulator calls the hooks under its lock: they only queue the change; one thread per cluster
applies its changes in order (a slurmctld restart takes a fraction of a second), ``settle()`` waits.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopilot_config.models.instance_types import gpus_for

from sandbox.services.hyperpod.model import Cluster, Node
from sandbox.services.slurm.agent import (
    AGENT_MODULE,
    install_agent,
    installed,
    installs_agent,
    start_agent,
    stop_agent,
)
from sandbox.services.slurm.cluster import Accounting, SlurmCluster

_log = logging.getLogger(__name__)

Credentials = Callable[[str, str], Mapping[str, str]]  # (role ARN, session name) → AWS_* variables


def slurm_node_name(node: Node) -> str:
    """HyperPod's Slurm node name: the first label of the instance's PrivateDnsHostname."""
    return node.hostname().split(".", 1)[0]


def is_slurm_cluster(cluster: Cluster) -> bool:
    return bool(cluster.controller_groups) and "Eks" not in cluster.request.get("Orchestrator", {})


@dataclass(frozen=True)
class _Change:
    kind: str  # controller | controller_down | controller_gone | add | stop | start | remove
    instance_id: str = ""
    name: str = ""  # the Slurm node name
    gpus: int = 0
    partitions: tuple[str, ...] = ()
    rebooted: bool = False
    controller: Mapping[str, str] = field(default_factory=dict)


class ClusterSlurm:
    """One HyperPod cluster's Slurm, changed in order on its own thread."""

    def __init__(self, owner: HyperPodSlurm, name: str, arn: str, workdir: Path) -> None:
        self.owner = owner
        self.name = name
        self.arn = arn
        self.slurm = SlurmCluster(
            name, workdir, slurmd_timeout=owner.slurmd_timeout, gres=owner.gres, accounting=owner.accounting
        )
        # instance id → Slurm node name, of the nodes in slurm.conf; replaced, never changed in place, so
        # a reader on another thread (the admin route) always sees a whole one
        self.nodes: dict[str, str] = {}
        self.agent: subprocess.Popen[bytes] | None = None
        self.agent_instance = ""  # the controller instance the agent runs on
        self._waiting: list[_Change] = []  # workers up before the controller
        self._queue: list[_Change | None] = []
        self._busy = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"slurm-{name}", daemon=True)
        self._thread.start()

    def submit(self, change: _Change | None) -> None:
        with self._changed:
            self._queue.append(change)
            self._changed.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait for its thread to end (after a delete or stop); True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def idle(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                batch, self._queue = self._queue, []
                self._busy = True
            try:
                index = 0
                while index < len(batch):
                    change = batch[index]
                    if change is None:
                        self._shut_down()
                        return
                    end = index + 1
                    if change.kind == "add":  # workers that came up together: one slurmctld restart
                        while end < len(batch) and (later := batch[end]) is not None and later.kind == "add":
                            end += 1
                    self._apply([c for c in batch[index:end] if c is not None])
                    index = end
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _apply(self, changes: list[_Change]) -> None:
        change = changes[0]
        try:
            if change.kind == "controller":
                self._controller_up(change)
            elif change.kind in ("controller_down", "controller_gone"):
                self._controller_down(change)
            elif change.kind == "add":
                if self.slurm.running:
                    self._add(changes)
                else:  # the controller is not up yet: they join when it is
                    self._waiting.extend(changes)
            elif change.name in self.slurm.nodes and self.slurm.running:
                if change.kind == "stop":
                    self.slurm.stop_node(change.name)
                elif change.kind == "start":
                    self.slurm.start_node(change.name, rebooted=change.rebooted)
                elif change.kind == "remove":
                    self.slurm.remove_nodes([change.name])
                    self.nodes = {i: n for i, n in self.nodes.items() if i != change.instance_id}
        except Exception as error:  # noqa: BLE001 - one failed change must not stop the others
            traceback.print_exc()
            self.owner.errors.append(f"{self.name}: {change.kind} {change.name}: {error}")

    def node_root(self, instance_id: str) -> Path:
        """The directory that stands for a controller instance's root file system (the agent's files)."""
        return self.slurm.workdir / "nodes" / instance_id

    def _controller_up(self, change: _Change) -> None:
        if not self.slurm.running:
            self.slurm.start()
            waiting, self._waiting = self._waiting, []
            if waiting:
                self._add(waiting)
        if self.agent is not None or self.owner.stopping:
            return
        controller, root = change.controller, self.node_root(change.instance_id)
        if not change.rebooted and self.owner.agent_wanted(controller):  # its lifecycle scripts, once
            root.mkdir(parents=True, exist_ok=True)
            if not install_agent(
                root,
                account_id=controller["account"],
                source_s3_uri=controller["source"],
                resource_config={"ClusterConfig": {"ClusterArn": self.arn, "ClusterName": self.name}},
            ):
                _log.warning(
                    "%s: the agent did not install on %s: see %s",
                    self.name,
                    change.instance_id,
                    root / "lifecycle.log",
                )
        if installed(root):  # systemd starts the enabled unit at every boot
            credentials = self.owner.credentials(controller["role"], change.instance_id)
            self.agent = start_agent(
                root,
                api_url=self.owner.api_url(),
                slurm_conf=self.slurm.conf,
                credentials=credentials,
                module=self.owner.agent_module,
            )
            self.agent_instance = change.instance_id

    def _controller_down(self, change: _Change) -> None:
        """The controller stopped answering (its processes die) or is gone (its root volume too)."""
        if self.agent is not None and self.agent_instance == change.instance_id:
            stop_agent(self.agent)
            self.agent = None
        if change.kind == "controller_gone":
            shutil.rmtree(self.node_root(change.instance_id), ignore_errors=True)

    def _add(self, changes: list[_Change]) -> None:
        self.slurm.add_nodes(
            {c.name: c.gpus for c in changes}, partitions={c.name: c.partitions for c in changes}
        )
        self.nodes = {**self.nodes, **{c.instance_id: c.name for c in changes}}

    def _shut_down(self) -> None:
        if self.agent is not None:
            stop_agent(self.agent)
            self.agent = None
        self.slurm.stop()


class HyperPodSlurm:
    """The HyperPod simulator's ``hooks``: real Slurm for its Slurm clusters (``Sandbox(slurm=True)``).

    ``api_url()`` gives the agent the local API's URL (started on demand); ``credentials(role, session)``
    the AWS_* variables of an STS AssumeRole of the controller group's ExecutionRole."""

    def __init__(
        self,
        *,
        api_url: Callable[[], str],
        credentials: Credentials,
        workdir: Path | str | None = None,
        agent_module: str = AGENT_MODULE,
        slurmd_timeout: int = 10,
        gres: bool = True,
        accounting: Accounting = "jobcomp",
    ) -> None:
        self.api_url = api_url
        self.gres = gres  # False: slurm.conf without gpu GRES (SlurmCluster's gres)
        self.accounting: Accounting = accounting  # SlurmCluster's: the job completion log, or slurmdbd
        self.credentials = credentials
        self.agent_module = agent_module
        self.slurmd_timeout = slurmd_timeout
        # short, whatever TMPDIR says: slurmstepd's Unix sockets live under it (108 characters at most)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        if (
            self._own_workdir
        ):  # traversable (mkdtemp's 700 is not): another user's job execs from a spool below
            self.workdir.chmod(0o711)
        self.errors: list[str] = []
        self.stopping = False  # no new agent once stop() began (its API server may be gone)
        self._clusters: dict[str, ClusterSlurm] = {}  # by cluster ARN
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ hooks (simulator lock held)
    def instance_running(self, cluster: Cluster, node: Node, *, rebooted: bool) -> None:
        if not is_slurm_cluster(cluster):
            return
        group = cluster.groups.get(node.group_name)
        if node.group_name in cluster.controller_groups:
            spec = group.spec if group is not None else {}
            _, _, _, region, account, _ = (cluster.arn.split(":", 5) + [""] * 6)[:6]
            controller = {
                "region": region,
                "account": account,
                "source": str(spec.get("LifeCycleConfig", {}).get("SourceS3Uri", "")),
                "role": str(spec.get("ExecutionRole", "")),
            }
            change = _Change("controller", node.instance_id, rebooted=rebooted, controller=controller)
            self._submit(cluster, change)
        elif group is not None and node.group_name not in cluster.login_groups:
            name = slurm_node_name(node)
            if rebooted:
                self._submit(cluster, _Change("start", node.instance_id, name, rebooted=True))
            else:
                partitions = tuple(group.spec.get("SlurmConfig", {}).get("PartitionNames") or ())
                gpus = gpus_for(node.instance_type)
                self._submit(cluster, _Change("add", node.instance_id, name, gpus, partitions))

    def instance_stopped(self, cluster: Cluster, node: Node) -> None:
        if is_slurm_cluster(cluster):
            kind = "controller_down" if node.group_name in cluster.controller_groups else "stop"
            self._submit(cluster, _Change(kind, node.instance_id, slurm_node_name(node)), create=False)

    def instance_terminated(self, cluster: Cluster, node: Node) -> None:
        if is_slurm_cluster(cluster):
            kind = "controller_gone" if node.group_name in cluster.controller_groups else "remove"
            self._submit(cluster, _Change(kind, node.instance_id, slurm_node_name(node)), create=False)

    def cluster_deleted(self, cluster: Cluster) -> None:
        with self._lock:
            slurm = self._clusters.pop(cluster.arn, None)
        if slurm is not None:
            slurm.submit(None)

    # ------------------------------------------------------------------ views
    def agent_wanted(self, controller: Mapping[str, str]) -> bool:
        return installs_agent(controller["account"], controller["source"])

    def cluster(self, name: str) -> ClusterSlurm | None:
        with self._lock:
            return next((c for c in self._clusters.values() if c.name == name), None)

    def view(self, name: str) -> dict[str, Any] | None:
        """The admin route's answer: where slurm.conf is and which instance is which Slurm node."""
        slurm = self.cluster(name)
        if slurm is None or not slurm.slurm.running:
            return None
        return {"slurmConf": str(slurm.slurm.conf), "nodes": dict(slurm.nodes)}

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until every queued change is applied (True) or ``timeout`` wall seconds pass."""
        with self._lock:
            clusters = list(self._clusters.values())
        return all(c.idle(timeout) for c in clusters)

    def stop(self) -> None:
        """Stop every cluster's daemons and agent; remove the work directory if it is ours."""
        with self._lock:
            self.stopping = True
            clusters, self._clusters = list(self._clusters.values()), {}
        for slurm in clusters:
            slurm.submit(None)
        for slurm in clusters:
            if not slurm.join(30):  # a stuck change: stop what it started anyway
                slurm._shut_down()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _submit(self, cluster: Cluster, change: _Change, *, create: bool = True) -> None:
        with self._lock:
            if self.stopping:  # the sandbox is going: nothing new starts
                return
            slurm = self._clusters.get(cluster.arn)
            if slurm is None:
                if not create:
                    return
                workdir = self.workdir / cluster.cluster_id
                slurm = self._clusters[cluster.arn] = ClusterSlurm(self, cluster.name, cluster.arn, workdir)
        slurm.submit(change)
