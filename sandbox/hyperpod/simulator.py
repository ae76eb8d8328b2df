"""The HyperPod simulator: SageMaker cluster operations with lifecycles on the sandbox clock.

One simulator serves one (account, region), like the SageMaker endpoint it stands in for; the
installed ones spawn one for any other pair on its first request (registry.py). Every API call and
every ``tick()`` first moves the lifecycles to ``clock.now()``; each state change becomes the event
HyperPod itself would send, shaped as AWS's samples (events/hyperpod/), on that region's default
EventBridge bus. As on AWS, an event arrives after the call that caused it has returned:
``timings.event_delivery`` simulated seconds after the change, published by a later ``tick()`` or
call, outside the simulator's lock (a target that calls back into the API never waits on the lock it
is being called from). ``duplicate_events`` repeats a seeded share of them, as EventBridge
(at-least-once) and SageMaker ("may send multiple events for each state change") do.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import itertools
import json
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any, NamedTuple

from moto.s3.models import s3_backends

from sandbox import bus
from sandbox.clock import SandboxClock
from sandbox.fleet import RunningInstance
from sandbox.hyperpod import lifecycle_logs
from sandbox.hyperpod.faults import (
    CapacityFault,
    health_fault,
    insufficient_capacity_message,
    no_capacity_event_message,
)
from sandbox.hyperpod.hooks import InstanceHooks
from sandbox.hyperpod.model import Cluster, HyperPodTimings, InstanceGroup, Node, epoch_millis, utc
from sandbox.hyperpod.registry import SIMULATORS
from sandbox.hyperpod.responses import install_sagemaker_seam, uninstall_sagemaker_seam
from sandbox.hyperpod.tagging import install_tagging_seam, uninstall_tagging_seam
from sandbox.hyperpod.validation import HyperPodApiError, validate_input, validation_error

SOURCE = "aws.sagemaker"
STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"


# Cluster event descriptions, from AWS's "SageMaker HyperPod cluster events reference" (the
# instance-creation failure and lifecycle-script wordings from its and the EventBridge page's samples).
_CLUSTER_STARTED = "Cluster {cluster} {operation} started successfully"
_CLUSTER_COMPLETED = "Cluster {cluster} {operation} completed successfully"
_CLUSTER_FAILED = "Cluster {cluster} {operation} failed"
_GROUP_COMPLETED = "Instance Group {group} {operation} in Cluster {cluster} completed successfully"
_PROVISIONED = "EC2 Instance {instance} successfully provisioned in Cluster {cluster} and IG {group}"
_CREATION_FAILED = "Instance creation in Cluster {cluster} and InstanceGroup {group} failed"
_SCRIPT_STARTED = "Instance lifecycle script execution for EC2InstanceId {instance} has Started"
_TERMINATING = (
    "Termination of EC2 Instance {instance} is currently in progress in Cluster {cluster} and IG {group}"
)
_REBOOTING = "Reboot of EC2 Instance {instance} is currently in progress on Cluster {cluster} and IG {group}"
_REBOOTED = "Instance reboot {instance} in Cluster {cluster} and IG {group} completed successfully"
_REPLACING = (
    "Instance {instance} is starting as part of instance replacement in Cluster {cluster} and IG {group}"
)

_DEFAULT_PAGE_SIZE = 10  # SageMaker's List* default when MaxResults is left out
_BUSY = frozenset({"reboot", "replace", "software", "shutdown", "move"})
_TAKES_REPAIR = frozenset({"Running", "Failure"})
_REPAIR_ACTIONS = ("None", "Reboot", "Replace")  # the RepairAction values sent (AWS documents none)
_DELETE_CONFLICTS = frozenset({"Deleting", "Updating", "SystemUpdating", "RollingBack"})
_SOFTWARE_UPDATE_NEEDED = (
    "Cluster {cluster} must be patched before nodes can be replaced: run UpdateClusterSoftware on the "
    "cluster, then call BatchReplaceClusterNodes again."
)

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


class _Outgoing(NamedTuple):
    due: datetime  # when EventBridge has it
    sequence: int  # keeps events due at the same time in the order they happened
    detail_type: str
    detail: dict[str, Any]
    resource: str
    time: datetime


def _not_found(what: str) -> HyperPodApiError:
    return HyperPodApiError("ResourceNotFound", what)


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class HyperPodSimulator:
    """Simulated SageMaker HyperPod for one account and region."""

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
        self._outbox: list[_Outgoing] = []
        self._now = clock.now()
        self._capacity_faults: list[CapacityFault] = []
        self._lifecycle_failures: list[lifecycle_logs.LifecycleFailure] = []
        # (cluster name, instance id, "reboot" | "replace") → repairs started on that node, by a Batch*
        # call or by HyperPod itself (NodeRecovery Automatic): what a fleet simulation counts.
        self.node_repairs: Counter[tuple[str, str, str]] = Counter()
        # An orchestrator on the instances (sandbox/slurm/: real Slurm), told of every instance change
        self.hooks: InstanceHooks | None = None
        self._operations: dict[str, Callable[[Params], dict[str, Any]]] = {
            "CreateCluster": self._create_cluster,
            "DescribeCluster": self._describe_cluster,
            "ListClusters": self._list_clusters,
            "UpdateCluster": self._update_cluster,
            "DeleteCluster": self._delete_cluster,
            "UpdateClusterSoftware": self._update_cluster_software,
            "ListClusterNodes": self._list_cluster_nodes,
            "DescribeClusterNode": self._describe_cluster_node,
            "BatchDeleteClusterNodes": self._batch_delete_cluster_nodes,
            "BatchRebootClusterNodes": self._batch_reboot_cluster_nodes,
            "BatchReplaceClusterNodes": self._batch_replace_cluster_nodes,
            "MoveClusterNodes": self._move_cluster_nodes,
            "ListClusterEvents": self._list_cluster_events,
            "DescribeClusterEvent": self._describe_cluster_event,
            "AddTags": self._add_tags,
            "ListTags": self._list_tags,
            "DeleteTags": self._delete_tags,
        }

    # ------------------------------------------------------------------ wiring

    def install(self) -> None:
        """Serve this (account, region)'s SageMaker cluster calls from the simulator (see responses.py),
        show its clusters to the Resource Groups Tagging API (see tagging.py), and every other
        (account, region) from a simulator spawned from this one on first use (see registry.py)."""
        SIMULATORS.add(self)
        install_sagemaker_seam()
        install_tagging_seam()

    def uninstall(self) -> None:
        """Give moto its own code back when this is the last installed simulator (spawned ones go too)."""
        if SIMULATORS.remove(self):
            uninstall_tagging_seam()
            uninstall_sagemaker_seam()

    def spawn(self, account_id: str, region: str) -> HyperPodSimulator:
        """A simulator for another (account, region): this one's clock, timings and event options,
        and a seed derived from this one's (still reproducible, yet not the same ids in every region)."""
        seed = None
        if self.seed is not None:
            digest = hashlib.sha256(f"{self.seed}/{account_id}/{region}".encode()).digest()
            seed = int.from_bytes(digest[:8], "big")
        return HyperPodSimulator(
            self.clock,
            region=region,
            account_id=account_id,
            timings=self.timings,
            seed=seed,
            duplicate_events=self.duplicate_events,
            repair_action_none=self.repair_action_none,
        )

    def for_region(self, region: str, account_id: str | None = None) -> HyperPodSimulator:
        """The installed simulators' member for (account, region): spawned on first use, as a request
        there would. ``account_id`` defaults to this simulator's."""
        simulator = SIMULATORS.get(account_id or self.account_id, region)
        if simulator is None:
            raise RuntimeError("no HyperPod simulator is installed")
        return simulator

    @staticmethod
    def every_region() -> list[HyperPodSimulator]:
        """Every simulator serving requests: the installed ones and those spawned so far."""
        return SIMULATORS.all()

    def __enter__(self) -> HyperPodSimulator:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def owns_arn(self, arn: str) -> bool:
        with self._lock:
            return arn in self._clusters

    def tagged_clusters(self) -> list[tuple[str, dict[str, str]]]:
        """(ARN, current tags) of every cluster that exists at ``clock.now()`` (the tagging seam's view)."""
        self.tick()
        with self._lock:
            return [(arn, dict(cluster.tags)) for arn, cluster in self._clusters.items()]

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        """Advance every lifecycle to ``clock.now()`` and publish the events that fall due."""
        try:
            with self._lock:
                self._advance(self.clock.now())
        finally:
            self._publish()

    def call(self, operation: str, params: Params) -> dict[str, Any]:
        """Serve one API call (the seam's entry point). Raises ``HyperPodApiError`` as AWS would.

        Events due before the call go out first; the call's own events are due later (``tick``)."""
        handler = self._operations.get(operation)
        if handler is None:
            raise ValueError(f"the HyperPod simulator does not serve {operation}")
        self.tick()
        with self._lock:
            self._advance(self.clock.now())
            validate_input(operation, params)
            return handler(params)

    def next_due(self) -> datetime | None:
        """When the next lifecycle step or event delivery falls due (None: nothing is scheduled), so a
        driver of a frozen clock can jump straight to it (sandbox.simulate)."""
        with self._lock:
            due = [self._timers[0][0]] if self._timers else []
            due += [self._outbox[0].due] if self._outbox else []
            return min(due, default=None)

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

    # ------------------------------------------------------------------ events

    def _publish(self) -> None:
        with self._lock:
            now = max(self._now, self.clock.now())
            due: list[_Outgoing] = []
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
            outgoing = _Outgoing(
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
                "RepairAction": _reported_repair_action(node),
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

    # ------------------------------------------------------------------ helpers

    def _cluster(self, name_or_arn: str) -> Cluster:
        for cluster in self._clusters.values():
            if name_or_arn in (cluster.name, cluster.arn):
                return cluster
        raise _not_found(f"Cluster {name_or_arn} not found.")

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

    def _take_capacity_fault(self, operation: str, instance_types: list[str]) -> str | None:
        for fault in self._capacity_faults:
            failing = fault.matches(operation, instance_types)
            if failing is not None:
                fault.times -= 1
                return failing
        return None

    def _controller_groups(self, groups: dict[str, InstanceGroup], request: Params) -> frozenset[str]:
        """Which groups hold the Slurm controller: SlurmConfig, else provisioning_parameters.json."""
        explicit = {g.name for g in groups.values() if g.is_slurm_controller()}
        if explicit or "Eks" in request.get("Orchestrator", {}):
            return frozenset(explicit)
        for group in groups.values():
            named = self._provisioning_parameter(group.spec.get("LifeCycleConfig", {}), "controller_group")
            if named is not None:
                return frozenset({named})
        # No provisioning parameters in (moto's) S3: fall back on the workshops' naming.
        return frozenset(g.name for g in groups.values() if "controller" in g.name.lower())

    def _login_groups(self, groups: dict[str, InstanceGroup], request: Params) -> frozenset[str]:
        """Which groups are Slurm login nodes (no slurmd): SlurmConfig, else provisioning_parameters.json's
        login_group (the workshops' way)."""
        explicit = {
            g.name for g in groups.values() if g.spec.get("SlurmConfig", {}).get("NodeType") == "Login"
        }
        if explicit or "Eks" in request.get("Orchestrator", {}):
            return frozenset(explicit)
        for group in groups.values():
            named = self._provisioning_parameter(group.spec.get("LifeCycleConfig", {}), "login_group")
            if named is not None:
                return frozenset({named})
        return frozenset()

    def _provisioning_parameter(self, lifecycle: Params, name: str) -> str | None:
        uri = str(lifecycle.get("SourceS3Uri", ""))
        if not uri.startswith("s3://"):
            return None
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        backend = s3_backends[self.account_id]["aws"]
        if bucket not in backend.buckets:
            return None
        key = f"{prefix.rstrip('/')}/provisioning_parameters.json".lstrip("/")
        obj = backend.get_object(bucket, key)
        if obj is None:
            return None
        try:
            value = json.loads(obj.value).get(name)
        except (ValueError, AttributeError):
            return None
        return str(value) if value else None

    @staticmethod
    def _paginate(
        items: list[Any], params: Params, default_size: int = _DEFAULT_PAGE_SIZE
    ) -> tuple[list[Any], str | None]:
        size = int(params.get("MaxResults") or default_size)
        start = 0
        token = params.get("NextToken")
        if token:
            try:
                start = int(base64.urlsafe_b64decode(token.encode()).decode())
            except ValueError:
                raise validation_error("Invalid pagination token.") from None
        page = items[start : start + size]
        end = start + size
        next_token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
        return page, next_token

    @classmethod
    def _list_result(
        cls,
        key: str,
        items: list[Any],
        params: Params,
        summarize: Callable[[Any], Any] = lambda item: item,
        default_size: int = _DEFAULT_PAGE_SIZE,
    ) -> dict[str, Any]:
        """A List* answer: the requested page of ``items`` under ``key``, NextToken while more are left."""
        page, next_token = cls._paginate(items, params, default_size)
        result: dict[str, Any] = {key: [summarize(item) for item in page]}
        if next_token:
            result["NextToken"] = next_token
        return result

    @staticmethod
    def _sort_listing(
        items: list[Any], params: Params, *, by_name: Callable[[Any], Any], by_time: Callable[[Any], Any]
    ) -> None:
        items.sort(
            key=by_name if params.get("SortBy") == "NAME" else by_time,
            reverse=params.get("SortOrder") == "Descending",
        )

    @staticmethod
    def _time_filter(params: Params, value: datetime) -> bool:
        after, before = params.get("CreationTimeAfter"), params.get("CreationTimeBefore")
        if after is not None and not value > _as_datetime(after):
            return False
        return before is None or value < _as_datetime(before)

    # ------------------------------------------------------------------ cluster lifecycle

    def _create_cluster(self, params: Params) -> dict[str, Any]:
        at = self._now
        name = params["ClusterName"]
        if any(c.name == name for c in self._clusters.values()):
            raise HyperPodApiError(
                "ResourceInUse",
                f"Resource Already Exists: Cluster with name {name} already exists. Choose a different name.",
            )
        specs = params.get("InstanceGroups") or []
        if not specs:
            raise validation_error("Validation Error: at least one instance group is required.")
        names = [s["InstanceGroupName"] for s in specs]
        if len(set(names)) != len(names):
            raise validation_error("Validation Error: instance group names must be unique.")
        for spec in specs:
            _check_instance_type(spec)
        groups = {s["InstanceGroupName"]: _group(s) for s in specs}
        cluster_id = self._new_cluster_id()
        request = {k: v for k, v in params.items() if k not in ("InstanceGroups", "Tags", "NodeRecovery")}
        cluster = Cluster(
            cluster_id=cluster_id,
            name=name,
            arn=f"arn:aws:sagemaker:{self.region}:{self.account_id}:cluster/{cluster_id}",
            creation_time=at,
            request=request,
            groups=groups,
            # Unverified (docs/sandbox.md): a create without NodeRecovery gets AWS's default, Automatic
            node_recovery=params.get("NodeRecovery", "Automatic"),
            tags={t["Key"]: t["Value"] for t in params.get("Tags", [])},
            controller_groups=self._controller_groups(groups, params),
            login_groups=self._login_groups(groups, params),
        )
        self._clusters[cluster.arn] = cluster
        token = cluster.operation_token
        failing = None
        if cluster.continuous:  # no capacity fails no create: the instances come as capacity allows
            self._launch_missing(cluster, "CreateCluster", at, self.timings.create_cluster)
        else:
            for group in groups.values():
                for _ in range(group.target_count):
                    self._new_node(cluster, group, at)
            failing = self._take_capacity_fault("CreateCluster", [g.instance_type for g in groups.values()])
        if failing is not None:
            self._after(
                at, self.timings.capacity_failure, lambda t: self._fail_create(cluster, token, failing, t)
            )
        else:
            self._after(at, self.timings.create_cluster, lambda t: self._finish_create(cluster, token, t))
        self._state_change(cluster, at)
        self._cluster_event(cluster, at, _CLUSTER_STARTED.format(cluster=name, operation="creation"))
        return {"ClusterArn": cluster.arn}

    def _finish_create(self, cluster: Cluster, token: int, at: datetime) -> None:
        if not self._cluster_alive(cluster, token) or cluster.status != "Creating":
            return
        if cluster.continuous:
            # InService once cluster-level resources are ready, however many instances came; a Slurm
            # cluster also waits for a controller (and login) node (AWS's continuous provisioning pages)
            if not self._priority_nodes_up(cluster):
                self._after(at, self.timings.capacity_retry, lambda t: self._finish_create(cluster, token, t))
                return
        else:
            if self._lifecycle_failed(cluster, at):
                return
            for node in cluster.nodes.values():
                self._bring_up(cluster, node, at)
            if self._waiting_for_deep_health_checks(
                cluster, at, lambda t: self._finish_create(cluster, token, t)
            ):
                return
        for group in cluster.groups.values():
            group.status = "InService"
            completed = _GROUP_COMPLETED.format(group=group.name, cluster=cluster.name, operation="creation")
            self._cluster_event(cluster, at, completed, group=group.name)
        cluster.status = "InService"
        self._state_change(cluster, at)
        completed = _CLUSTER_COMPLETED.format(cluster=cluster.name, operation="creation")
        self._cluster_event(cluster, at, completed)

    def _fail_create(self, cluster: Cluster, token: int, instance_type: str, at: datetime) -> None:
        if not self._cluster_alive(cluster, token) or cluster.status != "Creating":
            return
        group = next(g for g in cluster.groups.values() if g.instance_type == instance_type)
        message = insufficient_capacity_message(instance_type, f"{self.region}a")
        self._capacity_events(cluster, at, cluster.group_nodes(group.name))
        cluster.nodes.clear()
        for each in cluster.groups.values():
            each.status = "Failed"
        cluster.status = "Failed"
        cluster.failure_message = f"Instance group {group.name} failed to provision: {message}"
        self._state_change(cluster, at)
        description = _CLUSTER_FAILED.format(cluster=cluster.name, operation="creation")
        self._cluster_event(cluster, at, description, level="Error")

    def _lifecycle_failed(self, cluster: Cluster, at: datetime) -> bool:
        """An armed lifecycle_failure fault fails this create: the first instance of the group it names
        ends its lifecycle stream with the fault's lines, the others' scripts ran, the cluster is Failed."""
        for fault in self._lifecycle_failures:
            failing = next(
                (n for n in cluster.nodes.values() if fault.covers(cluster.name, n.group_name)), None
            )
            if failing is not None:
                break
        else:
            return False
        self._lifecycle_failures.remove(fault)
        for node in cluster.nodes.values():
            lines = (
                [*lifecycle_logs.STARTED_LINES, *fault.lines]
                if node is failing
                else lifecycle_logs.HEALTHY_LINES
            )
            self._write_lifecycle_log(cluster, node, at, lines)
        cluster.nodes.clear()
        for group in cluster.groups.values():
            group.status = "Failed"
        cluster.status = "Failed"
        cluster.failure_message = fault.message(failing.instance_id)
        self._state_change(cluster, at)
        description = _CLUSTER_FAILED.format(cluster=cluster.name, operation="creation")
        self._cluster_event(cluster, at, description, level="Error")
        return True

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

    # ------------------------------------------------------------------ continuous provisioning

    def _launch_missing(self, cluster: Cluster, operation: str, at: datetime, launch_seconds: float) -> None:
        """NodeProvisioningMode Continuous: launch every instance a group still lacks. Those that get
        capacity come up after ``launch_seconds``; the others fail after ``timings.capacity_failure``,
        each with an Error cluster event, and are launched again in the background (_retry_launches)."""
        missing = {
            group.name: group.target_count
            - sum(1 for n in cluster.group_nodes(group.name) if n.operation != "shutdown")
            for group in cluster.groups.values()
            if group.status != "Deleting"
        }
        missing = {name: count for name, count in missing.items() if count > 0}
        if not missing:
            return
        fault = self._capacity_fault(operation, [cluster.groups[name].instance_type for name in missing])
        for name, count in missing.items():
            group = cluster.groups[name]
            granted = count if fault is None or not fault.covers(group.instance_type) else fault.available
            for index in range(count):
                node = self._new_node(cluster, group, at)
                if index < granted:
                    self._after(at, launch_seconds, partial(self._finish_launch, cluster, node))
                else:
                    node.operation = "no_capacity"
                    self._after(
                        at,
                        self.timings.capacity_failure,
                        partial(self._launch_failed, cluster, node, operation),
                    )

    def _capacity_fault(self, operation: str, instance_types: list[str]) -> CapacityFault | None:
        """The armed capacity fault this launch round meets (it takes one of its ``times``), if any."""
        for fault in self._capacity_faults:
            if fault.matches(operation, instance_types) is not None:
                fault.times -= 1
                return fault
        return None

    def _launch_failed(self, cluster: Cluster, node: Node, operation: str, at: datetime) -> None:
        if not self._node_alive(cluster, node, "no_capacity"):
            return
        self._capacity_events(cluster, at, [node])
        del cluster.nodes[node.instance_id]
        if not cluster.capacity_retry_due:
            cluster.capacity_retry_due = True
            self._after(at, self.timings.capacity_retry, partial(self._retry_launches, cluster, operation))

    def _retry_launches(self, cluster: Cluster, operation: str, at: datetime) -> None:
        """The background retry: a launch round for what the groups still lack, while the cluster lives."""
        cluster.capacity_retry_due = False
        if self._clusters.get(cluster.arn) is cluster and cluster.status not in ("Deleting", "Failed"):
            self._launch_missing(cluster, operation, at, self.timings.scale_up)

    def _scale_continuously(self, cluster: Cluster, at: datetime) -> dict[str, Any]:
        """UpdateCluster of a Continuous cluster: "Your clusters and instance groups remain InService
        while scaling" (botocore): new instances come as on a create, removed ones go on their own."""
        for group in cluster.groups.values():
            if group.status != "Deleting":
                group.status = "InService"
        for node in cluster.nodes.values():
            if node.operation == "shutdown":
                self._schedule_removal(cluster, node, at)
        if any(g.status == "Deleting" for g in cluster.groups.values()):
            self._after(at, self.timings.scale_down, partial(self._drop_deleted_groups, cluster))
        self._launch_missing(cluster, "UpdateCluster", at, self.timings.scale_up)
        return {"ClusterArn": cluster.arn}

    def _drop_deleted_groups(self, cluster: Cluster, at: datetime) -> None:
        for group in list(cluster.groups.values()):
            if group.status == "Deleting" and not cluster.group_nodes(group.name):
                del cluster.groups[group.name]

    def _priority_nodes_up(self, cluster: Cluster) -> bool:
        """A Slurm cluster's controller group and login groups have a node up (EKS: nothing to wait for)."""
        if "Eks" in cluster.request.get("Orchestrator", {}):
            return True
        priority = [
            group.name
            for group in cluster.groups.values()
            if group.name in cluster.controller_groups or group.name in cluster.login_groups
        ]
        return all(any(n.provisioned for n in cluster.group_nodes(name)) for name in priority)

    def _capacity_events(self, cluster: Cluster, at: datetime, nodes: list[Node]) -> None:
        """The Error event of each instance that got no capacity, at ResourceType Instance as AWS has it."""
        for node in nodes:
            failure = {
                "FailureMessage": no_capacity_event_message(node.instance_type),
                "NodeLogicalId": self._new_uuid(),
            }
            self._instance_event(
                cluster, node, at, _CREATION_FAILED, level="Error", metadata={"Instance": failure}
            )

    def _update_cluster(self, params: Params) -> dict[str, Any]:
        at = self._now
        cluster = self._cluster(params["ClusterName"])
        if cluster.status != "InService":
            raise HyperPodApiError(
                "ConflictException",
                f"Cluster {cluster.name} is in {cluster.status} status; "
                "UpdateCluster is only allowed when the cluster is InService.",
            )
        specs: list[Params] = params.get("InstanceGroups", [])
        to_delete: list[str] = params.get("InstanceGroupsToDelete", [])
        for group_name in to_delete:
            if group_name not in cluster.groups:
                raise validation_error(
                    f"Instance group {group_name} does not exist in cluster {cluster.name}."
                )
        for spec in specs:
            existing = cluster.groups.get(spec["InstanceGroupName"])
            # Every group named is re-specified whole, an existing one too (below).
            _check_instance_type(spec)
            if (
                existing is not None
                and "InstanceType" in spec
                and "InstanceType" in existing.spec
                and spec["InstanceType"] != existing.instance_type
            ):
                raise validation_error(
                    f"InstanceType of instance group {existing.name} cannot be changed "
                    f"from {existing.instance_type} to {spec['InstanceType']}."
                )
        cluster.operation_token += 1
        token = cluster.operation_token
        previous_targets = {g.name: g.target_count for g in cluster.groups.values()}
        previous_specs = {g.name: g.spec for g in cluster.groups.values()}
        grown: list[str] = []
        shrunk = False
        for spec in specs:
            group_name = spec["InstanceGroupName"]
            group = cluster.groups.get(group_name)
            if group is None:
                group = _group(spec)
                group.target_count = 0
                cluster.groups[group_name] = group
            else:
                # The group becomes what was sent: UpdateCluster declares the whole group, and a member
                # left out (KubernetesConfig, ImageId...) is gone, as on AWS, not kept from before.
                group.spec = _group(spec).spec
            delta = spec["InstanceCount"] - group.target_count
            group.target_count = spec["InstanceCount"]
            if delta > 0:
                grown.append(group.instance_type)
                for _ in range(delta if not cluster.continuous else 0):  # Continuous: _launch_missing
                    self._new_node(cluster, group, at)
            elif delta < 0:
                shrunk = True
                for node in _scale_down_order(cluster.group_nodes(group_name))[:-delta]:
                    node.status, node.operation = "ShuttingDown", "shutdown"
            group.status = "Creating" if group_name not in previous_targets else "Updating"
        for group_name in to_delete:
            group = cluster.groups[group_name]
            group.status, group.target_count = "Deleting", 0
            shrunk = shrunk or bool(cluster.group_nodes(group_name))
            for node in cluster.group_nodes(group_name):
                node.status, node.operation = "ShuttingDown", "shutdown"
        if "NodeRecovery" in params:
            cluster.node_recovery = params["NodeRecovery"]
        if cluster.continuous:
            return self._scale_continuously(cluster, at)
        cluster.status = "Updating"
        failing = self._take_capacity_fault("UpdateCluster", grown) if grown else None
        if failing is not None:
            self._after(
                at,
                self.timings.capacity_failure,
                lambda t: self._fail_update(
                    cluster, token, failing, previous_targets, t, previous_specs=previous_specs
                ),
            )
        else:
            duration = (
                self.timings.scale_up
                if grown
                else self.timings.scale_down
                if shrunk
                else self.timings.update_minimum
            )
            self._after(at, duration, lambda t: self._finish_update(cluster, token, t))
        self._state_change(cluster, at)
        return {"ClusterArn": cluster.arn}

    def _finish_update(self, cluster: Cluster, token: int, at: datetime) -> None:
        if not self._cluster_alive(cluster, token):
            return
        for node in list(cluster.nodes.values()):
            if node.operation == "launch":
                self._bring_up(cluster, node, at)
            elif node.operation == "shutdown":
                del cluster.nodes[node.instance_id]
                if self.hooks is not None:
                    self.hooks.instance_terminated(cluster, node)
        for group in list(cluster.groups.values()):
            if group.status == "Deleting":
                del cluster.groups[group.name]
        if self._waiting_for_deep_health_checks(
            cluster, at, lambda t: self._finish_update(cluster, token, t)
        ):
            return
        for group in cluster.groups.values():
            group.status = "InService"
        cluster.status = "InService"
        self._state_change(cluster, at)

    def _fail_update(
        self,
        cluster: Cluster,
        token: int,
        instance_type: str,
        previous_targets: dict[str, int],
        at: datetime,
        *,
        previous_specs: dict[str, dict[str, Any]],
    ) -> None:
        if not self._cluster_alive(cluster, token):
            return
        failed = next(
            g for g in cluster.groups.values() if g.instance_type == instance_type and g.status != "Deleting"
        )
        message = insufficient_capacity_message(instance_type, f"{self.region}a")
        launching = [n for n in cluster.nodes.values() if n.operation == "launch"]
        self._capacity_events(cluster, at, [n for n in launching if n.group_name == failed.name])
        for node in launching:
            del cluster.nodes[node.instance_id]
        for group in list(cluster.groups.values()):
            if group.name not in previous_targets:
                del cluster.groups[group.name]
            else:
                group.target_count = previous_targets[group.name]
                group.spec = previous_specs[group.name]  # a rollback restores the groups as they were
                group.status = "Updating"
        cluster.status = "RollingBack"
        cluster.failure_message = f"Instance group {failed.name} failed to scale up: {message}"
        self._state_change(cluster, at)
        description = _CLUSTER_FAILED.format(cluster=cluster.name, operation="update")
        self._cluster_event(cluster, at, description, level="Error")
        self._after(at, self.timings.rollback, lambda t: self._finish_rollback(cluster, token, t))

    def _finish_rollback(self, cluster: Cluster, token: int, at: datetime) -> None:
        if not self._cluster_alive(cluster, token):
            return
        for node in cluster.nodes.values():
            if node.operation == "shutdown":  # scale-downs of the failed update are undone
                node.status, node.operation = node.resting_status, None
        for group in cluster.groups.values():
            group.status = "InService"
        cluster.status = "InService"
        self._state_change(cluster, at)

    def _delete_cluster(self, params: Params) -> dict[str, Any]:
        at = self._now
        cluster = self._cluster(params["ClusterName"])
        # AWS models DeleteCluster's ConflictException without saying when; the sandbox takes the
        # stricter reading (docs/sandbox.md, "Unverified"): a cluster already Deleting (a repeated
        # delete) or in the middle of an update refuses it. A Creating or Failed one is deleted (a create
        # is rolled back that way); a gone one is ResourceNotFound (``_cluster``).
        if cluster.status in _DELETE_CONFLICTS:
            raise HyperPodApiError(
                "ConflictException",
                f"Cluster {cluster.name} is in {cluster.status} status; DeleteCluster is not allowed now.",
            )
        cluster.operation_token += 1
        token = cluster.operation_token
        cluster.status = "Deleting"
        for group in cluster.groups.values():
            group.status = "Deleting"
        for node in cluster.nodes.values():
            node.status, node.operation = "ShuttingDown", "shutdown"
        if self.hooks is not None:
            self.hooks.cluster_deleted(cluster)
        self._after(at, self.timings.delete_cluster, lambda t: self._remove_cluster(cluster, token))
        self._state_change(cluster, at)
        return {"ClusterArn": cluster.arn}

    def _remove_cluster(self, cluster: Cluster, token: int) -> None:
        if self._cluster_alive(cluster, token):
            del self._clusters[cluster.arn]
            self._cluster_events.pop(cluster.arn, None)

    def _update_cluster_software(self, params: Params) -> dict[str, Any]:
        at = self._now
        cluster = self._cluster(params["ClusterName"])
        if cluster.status != "InService":
            raise HyperPodApiError(
                "ConflictException",
                f"Cluster {cluster.name} is in {cluster.status} status; "
                "UpdateClusterSoftware is only allowed when the cluster is InService.",
            )
        names = [g["InstanceGroupName"] for g in params.get("InstanceGroups", [])] or list(cluster.groups)
        for group_name in names:
            if group_name not in cluster.groups:
                raise validation_error(
                    f"Instance group {group_name} does not exist in cluster {cluster.name}."
                )
        cluster.operation_token += 1
        token = cluster.operation_token
        cluster.status = "SystemUpdating"
        for group_name in names:
            cluster.groups[group_name].status = "SystemUpdating"
            for node in cluster.group_nodes(group_name):
                if node.operation is None:
                    node.status, node.operation = "SystemUpdating", "software"
        self._after(at, self.timings.software_update, lambda t: self._finish_software(cluster, token, t))
        self._state_change(cluster, at)
        return {"ClusterArn": cluster.arn}

    def _finish_software(self, cluster: Cluster, token: int, at: datetime) -> None:
        if not self._cluster_alive(cluster, token):
            return
        for node in cluster.nodes.values():
            if node.operation == "software":
                node.status, node.operation = node.resting_status, None
                node.last_software_update = at
        cluster.needs_software_update = False  # patched: the Batch* node APIs work now
        for group in cluster.groups.values():
            group.status = "InService"
        cluster.status = "InService"
        self._state_change(cluster, at)

    def _describe_cluster(self, params: Params) -> dict[str, Any]:
        return self._cluster(params["ClusterName"]).describe()

    def _list_clusters(self, params: Params) -> dict[str, Any]:
        clusters = [
            c
            for c in self._clusters.values()
            if params.get("NameContains", "") in c.name
            and self._time_filter(params, c.creation_time)
            and (
                "TrainingPlanArn" not in params
                or any(g.spec.get("TrainingPlanArn") == params["TrainingPlanArn"] for g in c.groups.values())
            )
        ]
        self._sort_listing(
            clusters,
            params,
            by_name=lambda c: (c.name, c.creation_time),
            by_time=lambda c: (c.creation_time, c.name),
        )
        return self._list_result("ClusterSummaries", clusters, params, Cluster.summary)

    # ------------------------------------------------------------------ nodes

    def _list_cluster_nodes(self, params: Params) -> dict[str, Any]:
        cluster = self._cluster(params["ClusterName"])
        contains = params.get("InstanceGroupNameContains", "")
        nodes = [
            n
            for n in cluster.nodes.values()
            if contains in n.group_name and self._time_filter(params, n.launch_time)
        ]
        self._sort_listing(
            nodes,
            params,
            by_name=lambda n: (n.group_name, n.instance_id),
            by_time=lambda n: (n.launch_time, n.instance_id),
        )
        return self._list_result("ClusterNodeSummaries", nodes, params, Node.summary)

    def _describe_cluster_node(self, params: Params) -> dict[str, Any]:
        cluster = self._cluster(params["ClusterName"])
        node_id = params.get("NodeId")
        if node_id is None:
            raise validation_error(
                "NodeId is required: NodeLogicalId applies to clusters with NodeProvisioningMode "
                "Continuous, which the sandbox does not simulate."
            )
        node = cluster.nodes.get(node_id)
        if node is None:
            raise _not_found(f"Node {node_id} not found in cluster {cluster.arn}.")
        return {"NodeDetails": cluster.describe_node(node)}

    @staticmethod
    def _node_ids(params: Params) -> list[str]:
        if "NodeIds" not in params:
            raise validation_error(
                "NodeIds is required: NodeLogicalIds apply to clusters with NodeProvisioningMode "
                "Continuous, which the sandbox does not simulate."
            )
        return _unique(params["NodeIds"])

    def _move_cluster_nodes(self, params: Params) -> dict[str, Any]:
        """MoveClusterNodes (botocore 1.44.8): each node accepted goes DetachInProgress in its group, then
        joins the target group AttachInProgress (same instance id and type), then Running."""
        source = self._cluster(params["SourceClusterArn"])
        target = self._cluster(params["TargetClusterArn"])
        for cluster in (source, target):
            if not (
                cluster.status == "InService"
                and cluster.continuous
                and "Eks" in cluster.request.get("Orchestrator", {})
            ):
                raise validation_error(
                    f"Cluster {cluster.name}: both clusters must be InService, use Amazon EKS "
                    "orchestration, and use Continuous as the NodeProvisioningMode."
                )
        from_group = source.groups.get(params["SourceInstanceGroupName"])
        to_group = target.groups.get(params["TargetInstanceGroupName"])
        if from_group is None or to_group is None or from_group is to_group:
            raise validation_error("The source and target instance groups must exist and differ.")
        chosen = [k for k in ("NodeIds", "NodeLogicalIds", "InstanceCount") if k in params]
        if chosen not in (["NodeIds"], ["InstanceCount"]):
            raise validation_error(
                "Specify exactly one of NodeIds, NodeLogicalIds, or InstanceCount (the sandbox does "
                "not move by NodeLogicalIds)."
            )
        types = to_group.spec.get("InstanceRequirements", {}).get("InstanceTypes") or [to_group.instance_type]
        members = source.group_nodes(from_group.name)
        movable = [n for n in members if n.status == "Running" and n.operation is None]
        failed: list[dict[str, str]] = []
        if "InstanceCount" in params:
            moving = [n for n in movable if n.instance_type in types][: params["InstanceCount"]]
            if len(moving) < params["InstanceCount"]:
                raise validation_error("Fewer nodes than InstanceCount are eligible to move.")
        else:
            moving = []
            for node_id in _unique(params["NodeIds"]):
                node = next((n for n in members if n.instance_id == node_id), None)
                code = (
                    ("NodeIdNotFound", f"Node {node_id} is not in instance group {from_group.name}.")
                    if node is None
                    else ("NodeIdInUse", f"Node {node_id} has an operation in progress.")
                    if node.operation is not None
                    else ("InvalidNodeStatus", f"Node {node_id} is in {node.status} status.")
                    if node.status != "Running"
                    else ("NodeInstanceTypeMismatch", f"Node {node_id} is a {node.instance_type}.")
                    if node.instance_type not in types
                    else None
                )
                if code is not None:
                    failed.append({"NodeId": node_id, "Code": code[0], "Message": code[1]})
                elif node is not None:
                    moving.append(node)
            if not moving:
                raise validation_error("None of the specified nodes can be moved.")
        if from_group.target_count - len(moving) < int(from_group.spec.get("MinInstanceCount", 0)):
            raise validation_error(f"Moving the nodes would take {from_group.name} below its minimum.")
        for node in moving:
            node.status, node.operation = "DetachInProgress", "move"
            self._after(
                self._now, self.timings.move_detach, partial(self._hand_off, source, node, target, to_group)
            )
        result: dict[str, Any] = {"Successful": [n.instance_id for n in moving]}
        if "NodeIds" in params:
            result["Failed"] = failed
        return result

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

    def _batch_reboot_cluster_nodes(self, params: Params) -> dict[str, Any]:
        return self._batch_repair(params, replace=False)

    def _batch_replace_cluster_nodes(self, params: Params) -> dict[str, Any]:
        cluster = self._cluster(params["ClusterName"])
        if cluster.needs_software_update:
            # botocore: "If you want to invoke this API on an existing cluster, you'll first need to
            # patch the cluster by running the UpdateClusterSoftware API." The answer is unmodelled;
            # its code and wording here are the sandbox's (docs/sandbox.md, "Unverified").
            raise validation_error(_SOFTWARE_UPDATE_NEEDED.format(cluster=cluster.name))
        return self._batch_repair(params, replace=True)

    def _batch_repair(self, params: Params, *, replace: bool) -> dict[str, Any]:
        cluster = self._cluster(params["ClusterName"])
        start = self._start_replace if replace else self._start_reboot
        successful, failed = [], []
        for node_id in self._node_ids(params):
            node = cluster.nodes.get(node_id)
            code = self._repair_refusal(cluster, node, node_id, replace=replace)
            if code is not None:
                failed.append({"NodeId": node_id, "ErrorCode": code[0], "Message": code[1]})
                continue
            assert node is not None
            start(cluster, node, self._now)
            successful.append(node_id)
        return _batch_result(successful, failed)

    def _repair_refusal(
        self, cluster: Cluster, node: Node | None, node_id: str, *, replace: bool
    ) -> tuple[str, str] | None:
        """Why a reboot / replace of ``node_id`` is refused, as (ErrorCode, Message); None if allowed."""
        if node is None:
            return "InstanceIdNotFound", f"Instance {node_id} was not found in cluster {cluster.name}."
        if node.operation in _BUSY and node.operation != "shutdown":
            return "InstanceIdInUse", f"Instance {node_id} has an operation in progress ({node.operation})."
        if replace and node.group_name in cluster.controller_groups:
            return (
                "InvalidInstanceStatus",
                f"Instance {node_id} is a Slurm controller node; controller nodes cannot be replaced.",
            )
        if node.status not in _TAKES_REPAIR or node.operation is not None:
            return "InvalidInstanceStatus", f"Instance {node_id} is in {node.status} status."
        return None

    def _start_reboot(self, cluster: Cluster, node: Node, at: datetime) -> None:
        self.node_repairs[(cluster.name, node.instance_id, "reboot")] += 1
        node.status, node.operation, node.message = "Pending", "reboot", "Rebooting the instance."
        self._instance_event(cluster, node, at, _REBOOTING)
        if self.hooks is not None:
            self.hooks.instance_stopped(cluster, node)
        self._after(at, self.timings.reboot_node, lambda t: self._finish_reboot(cluster, node, t))

    def _finish_reboot(self, cluster: Cluster, node: Node, at: datetime) -> None:
        if not self._node_alive(cluster, node, "reboot"):
            return
        node.operation, node.message = None, ""
        was_unhealthy = not node.healthy
        self._instance_event(cluster, node, at, _REBOOTED)
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
        self._instance_event(cluster, node, at, _TERMINATING)
        if self.hooks is not None:
            self.hooks.instance_stopped(cluster, node)
        self._instance_event(cluster, successor, at, _REPLACING)
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
        self._instance_event(cluster, node, at, _PROVISIONED)
        self._instance_event(
            cluster, node, at, _SCRIPT_STARTED, metadata={"Instance": {"LcsExecutionState": "Started"}}
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

    def _batch_delete_cluster_nodes(self, params: Params) -> dict[str, Any]:
        at = self._now
        cluster = self._cluster(params["ClusterName"])
        successful, failed = [], []
        for node_id in self._node_ids(params):
            node = cluster.nodes.get(node_id)
            if node is None:
                failed.append(
                    {"NodeId": node_id, "Code": "NodeIdNotFound", "Message": f"Node {node_id} not found."}
                )
            elif node.operation in _BUSY:
                failed.append(
                    {
                        "NodeId": node_id,
                        "Code": "NodeIdInUse",
                        "Message": f"Node {node_id} has an operation in progress ({node.operation}).",
                    }
                )
            elif node.group_name in cluster.controller_groups or node.operation is not None:
                failed.append(
                    {
                        "NodeId": node_id,
                        "Code": "InvalidNodeStatus",
                        "Message": f"Node {node_id} cannot be deleted in its current state ({node.status}).",
                    }
                )
            else:
                node.status, node.operation = "ShuttingDown", "shutdown"
                cluster.groups[node.group_name].target_count -= 1
                self._schedule_removal(cluster, node, at)
                self._instance_event(cluster, node, at, _TERMINATING)
                successful.append(node_id)
        result: dict[str, Any] = {}
        if successful:
            result["Successful"] = successful
        if failed:
            result["Failed"] = failed
        return result

    # ------------------------------------------------------------------ cluster events

    def _continuous_cluster(self, name_or_arn: str) -> Cluster:
        cluster = self._cluster(name_or_arn)
        if not cluster.continuous:
            # AWS documents the operations for Continuous clusters only; its exact answer is unverified.
            raise validation_error(
                f"Cluster events are only supported for clusters with NodeProvisioningMode set to "
                f"Continuous. Cluster {cluster.name} does not use Continuous node provisioning."
            )
        return cluster

    def _list_cluster_events(self, params: Params) -> dict[str, Any]:
        cluster = self._continuous_cluster(params["ClusterName"])
        after, before = params.get("EventTimeAfter"), params.get("EventTimeBefore")
        events = [
            e
            for e in self._cluster_events.get(cluster.arn, [])
            if params.get("InstanceGroupName") in (None, e.get("InstanceGroupName"))
            and params.get("NodeId") in (None, e.get("InstanceId"))
            and params.get("ResourceType") in (None, e["ResourceType"])
            and (after is None or e["EventTime"] > _as_datetime(after))
            and (before is None or e["EventTime"] < _as_datetime(before))
        ]
        # EventTime is the only SortBy; the model's default order is Descending.
        events.sort(key=lambda e: e["EventTime"], reverse=params.get("SortOrder") != "Ascending")
        summary_keys = (
            "EventId",
            "ClusterArn",
            "ClusterName",
            "InstanceGroupName",
            "InstanceId",
            "ResourceType",
            "EventTime",
            "Description",
            "EventLevel",
        )
        return self._list_result(
            "Events", events, params, lambda event: {k: event[k] for k in summary_keys if k in event}
        )

    def _describe_cluster_event(self, params: Params) -> dict[str, Any]:
        cluster = self._continuous_cluster(params["ClusterName"])
        for event in self._cluster_events.get(cluster.arn, []):
            if event["EventId"] == params["EventId"]:
                return {"EventDetails": event}
        raise _not_found(f"Event {params['EventId']} not found for cluster {cluster.name}.")

    # ------------------------------------------------------------------ tags

    def _tagged(self, arn: str) -> Cluster:
        cluster = self._clusters.get(arn)
        if cluster is None:
            raise validation_error(f"Resource {arn} not found.")
        return cluster

    def _add_tags(self, params: Params) -> dict[str, Any]:
        cluster = self._tagged(params["ResourceArn"])
        merged = dict(cluster.tags) | {t["Key"]: t["Value"] for t in params["Tags"]}
        if len(merged) > 50:
            raise validation_error("Tag count exceeds the limit of 50 tags per resource.")
        cluster.tags = merged
        return {"Tags": params["Tags"]}

    def _list_tags(self, params: Params) -> dict[str, Any]:
        cluster = self._tagged(params["ResourceArn"])
        tags = [{"Key": k, "Value": v} for k, v in cluster.tags.items()]
        return self._list_result("Tags", tags, params, default_size=50)

    def _delete_tags(self, params: Params) -> dict[str, Any]:
        cluster = self._tagged(params["ResourceArn"])
        for key in params["TagKeys"]:
            cluster.tags.pop(key, None)
        return {}

    # ------------------------------------------------------------------ faults

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
        if instance_status not in _TAKES_REPAIR:
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
                    "RepairAction": _reported_repair_action(target),
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

    # ------------------------------------------------------------------ fleet

    def running_instances(self) -> list[RunningInstance]:
        """The billable instances right now, with their cluster's tags (for the Budgets simulator)."""
        try:
            with self._lock:
                self._advance(self.clock.now())
                # one copy of a cluster's tags shared by its instances (read, never changed)
                tags = {arn: dict(cluster.tags) for arn, cluster in self._clusters.items()}
                return [
                    RunningInstance(
                        cluster_name=cluster.name,
                        cluster_arn=cluster.arn,
                        instance_group=node.group_name,
                        instance_id=node.instance_id,
                        instance_type=node.instance_type,
                        tags=tags[cluster.arn],
                        status=node.status,
                    )
                    for cluster in self._clusters.values()
                    for node in cluster.nodes.values()
                    if node.billable
                ]
        finally:
            self._publish()


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return utc(value)
    return utc(datetime.fromtimestamp(float(value)))


def _check_instance_type(spec: Params) -> None:
    """A group names its instance type, or the types of a flexible group, and not both (botocore: "The
    InstanceType and InstanceRequirements properties are mutually exclusive")."""
    named = [k for k in ("InstanceType", "InstanceRequirements") if k in spec]
    if len(named) != 1:
        raise validation_error(
            f"Exactly one of InstanceType and InstanceRequirements is required for instance group "
            f"{spec['InstanceGroupName']}."
        )


def _group(spec: Params) -> InstanceGroup:
    return InstanceGroup(
        spec={k: v for k, v in spec.items() if k != "InstanceCount"},
        target_count=int(spec["InstanceCount"]),
    )


def _reported_repair_action(node: Node) -> str:
    """A Node Health event's RepairAction: what HyperPod itself will do ("None" unless it repairs the
    node on its own, NodeRecovery Automatic), unless a fault set what the event says. AWS's sample
    shows "None" with "Please Replace the Faulty Node."; the reading of the field is ours, not AWS's."""
    if node.healthy:
        return "None"
    if node.repair_action_override is not None:
        return node.repair_action_override
    return node.needed_repair if node.auto_repair else "None"


def _heal(node: Node) -> None:
    node.healthy, node.fault_type = True, None
    node.health_reason = node.needed_repair = node.recommendation = ""
    node.auto_repair = False
    node.repair_action_override = None
    node.resting_status = "Running"


def _scale_down_order(nodes: list[Node]) -> list[Node]:
    """Which nodes a scale-down removes first: not yet launched, then unhealthy, then newest."""
    idle = [n for n in nodes if n.operation in (None, "launch", "no_capacity")]
    return sorted(idle, key=lambda n: (n.provisioned, n.healthy, -n.launch_time.timestamp()))


def _batch_result(successful: list[str], failed: list[dict[str, str]]) -> dict[str, Any]:
    result: dict[str, Any] = {"Failed": failed}
    if successful:
        result["Successful"] = successful
    return result
