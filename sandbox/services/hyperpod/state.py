"""The HyperPod simulator's state and clock: what one simulator holds (clusters, timers, the event
outbox, armed faults), the timer queue its lifecycles run on, and the lookups and id generators every
other part of it uses. The bottom of the simulator's layers (events, node_lifecycle,
cluster_lifecycle, injection, api, simulator: each a base class of the next).
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import lifecycle_logs
from sandbox.services.hyperpod.faults import CapacityFault
from sandbox.services.hyperpod.hooks import InstanceHooks
from sandbox.services.hyperpod.model import Cluster, HyperPodTimings, InstanceGroup, Node
from sandbox.services.hyperpod.validation import HyperPodApiError

Action = Callable[[datetime], None]
Params = dict[str, Any]


class NodeState(NamedTuple):
    status: str  # InstanceStatus
    healthy: bool  # HMA's verdict
    operation: str | None  # launch | reboot | replace | shutdown | software, None when idle
    replaced_by: str | None  # the successor's instance id once a replace started

    @property
    def serves(self) -> bool:
        """Running, healthy and idle: a node a job can run on."""
        return self.status == "Running" and self.healthy and self.operation is None


class Outgoing(NamedTuple):
    due: datetime  # when EventBridge has it
    sequence: int  # keeps events due at the same time in the order they happened
    detail_type: str
    detail: dict[str, Any]
    resource: str
    time: datetime


def not_found(what: str) -> HyperPodApiError:
    return HyperPodApiError("ResourceNotFound", what)


class SimulatorState:
    """What a simulator holds, its timer queue and its lookups (a base of ``HyperPodSimulator``)."""

    def __init__(
        self,
        clock: SandboxClock,
        region: str = "us-east-1",
        account_id: str = "123456789012",
        timings: HyperPodTimings | None = None,
        seed: int | None = None,
        *,
        duplicate_events: float = 0.0,
        repair_action_none: float = 0.0,
    ) -> None:
        if not 0.0 <= duplicate_events <= 1.0:
            raise ValueError("duplicate_events must be between 0 and 1")
        if not 0.0 <= repair_action_none <= 1.0:
            raise ValueError("repair_action_none must be between 0 and 1")
        self.clock = clock
        self.region = region
        self.account_id = account_id
        self.timings = timings or HyperPodTimings()
        self.seed = seed
        self.duplicate_events = duplicate_events
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        # Its own stream, so turning duplicates on does not change the ids a seed gives.
        self._duplicates = random.Random(None if seed is None else f"{seed}/duplicates")
        # The share of faults on NodeRecovery Automatic clusters whose Node Health events say RepairAction
        # "None" although HyperPod repairs the node (AWS's only sample says "None" beside "Please
        # Replace the Faulty Node."; what the field means is not documented). Its own stream too.
        self.repair_action_none = repair_action_none
        self._repair_actions = random.Random(None if seed is None else f"{seed}/repair-action")
        self._clusters: dict[str, Cluster] = {}  # by ARN, in creation order
        self._cluster_events: dict[str, list[dict[str, Any]]] = {}
        self._timers: list[tuple[datetime, int, Action]] = []
        self._sequence = itertools.count()
        self._outbox: list[Outgoing] = []
        self._now = clock.now()
        self._capacity_faults: list[CapacityFault] = []
        self._lifecycle_failures: list[lifecycle_logs.LifecycleFailure] = []
        # (cluster name, instance id, "reboot" | "replace") → repairs started on that node, by a Batch*
        # call or by HyperPod itself (NodeRecovery Automatic): what a fleet simulation counts.
        self.node_repairs: Counter[tuple[str, str, str]] = Counter()
        # An orchestrator on the instances (sandbox/services/slurm/: real Slurm), told of every
        # instance change
        self.hooks: InstanceHooks | None = None

    def node_state(self, cluster_name: str, instance_id: str) -> NodeState | None:
        """A node as the orchestrator on it sees it (None once it is gone): a scheduler on the cluster
        (Slurm) needs health and the successor of a replaced node, which no SageMaker call returns."""
        with self._lock:
            cluster = next((c for c in self._clusters.values() if c.name == cluster_name), None)
            node = cluster.nodes.get(instance_id) if cluster is not None else None
            if node is None:
                return None
            return NodeState(node.status, node.healthy, node.operation, node.replaced_by)

    def _advance(self, now: datetime) -> None:
        while self._timers and self._timers[0][0] <= now:
            due, _, action = heapq.heappop(self._timers)
            self._now = max(self._now, due)
            action(due)
        self._now = max(self._now, now)

    def _at(self, due: datetime, action: Action) -> None:
        heapq.heappush(self._timers, (due, next(self._sequence), action))

    def _after(self, start: datetime, seconds: float, action: Action) -> None:
        self._at(start + timedelta(seconds=seconds), action)

    # ------------------------------------------------------------------ helpers

    def _cluster(self, name_or_arn: str) -> Cluster:
        for cluster in self._clusters.values():
            if name_or_arn in (cluster.name, cluster.arn):
                return cluster
        raise not_found(f"Cluster {name_or_arn} not found.")

    def _new_uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _new_cluster_id(self) -> str:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        return "".join(self._rng.choice(alphabet) for _ in range(12))

    def _new_node(self, cluster: Cluster, group: InstanceGroup, at: datetime) -> Node:
        instance_id = "i-" + "".join(self._rng.choice("0123456789abcdef") for _ in range(17))
        octets = (self._rng.randint(0, 255), self._rng.randint(0, 255), self._rng.randint(4, 254))
        node = Node(
            instance_id=instance_id,
            group_name=group.name,
            instance_type=group.instance_type,
            launch_time=at,
            private_ip="10.{}.{}.{}".format(*octets),
            hostname_suffix="ec2.internal"
            if self.region == "us-east-1"
            else f"{self.region}.compute.internal",
            availability_zone=f"{self.region}a",
            operation="launch",
        )
        cluster.nodes[instance_id] = node
        return node

    def _node_alive(self, cluster: Cluster, node: Node, operation: str) -> bool:
        return (
            self._clusters.get(cluster.arn) is cluster
            and cluster.nodes.get(node.instance_id) is node
            and node.operation == operation
        )

    def _cluster_alive(self, cluster: Cluster, token: int) -> bool:
        return self._clusters.get(cluster.arn) is cluster and cluster.operation_token == token
