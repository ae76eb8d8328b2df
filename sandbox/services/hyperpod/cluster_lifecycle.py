"""Cluster lifecycles in the HyperPod simulator: CreateCluster, UpdateCluster, DeleteCluster and
UpdateClusterSoftware, from the call through their progression on the clock to InService, Failed or
RollingBack; NodeProvisioningMode Continuous (instances launched as capacity allows, retried in the
background); and which groups hold the Slurm controller and login nodes.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from typing import Any

from moto.s3.models import s3_backends

from sandbox.services.hyperpod import lifecycle_logs
from sandbox.services.hyperpod.events import (
    CLUSTER_COMPLETED,
    CLUSTER_FAILED,
    CLUSTER_STARTED,
    CREATION_FAILED,
    GROUP_COMPLETED,
)
from sandbox.services.hyperpod.faults import (
    CapacityFault,
    insufficient_capacity_message,
    no_capacity_event_message,
)
from sandbox.services.hyperpod.model import Cluster, InstanceGroup, Node
from sandbox.services.hyperpod.node_lifecycle import NodeLifecycle
from sandbox.services.hyperpod.state import Params
from sandbox.services.hyperpod.validation import HyperPodApiError, validation_error

_DELETE_CONFLICTS = frozenset({"Deleting", "Updating", "SystemUpdating", "RollingBack"})


class ClusterLifecycle(NodeLifecycle):
    """Create, update, delete and patch clusters on the clock (a base of ``HyperPodSimulator``)."""

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
        self._cluster_event(cluster, at, CLUSTER_STARTED.format(cluster=name, operation="creation"))
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
            completed = GROUP_COMPLETED.format(group=group.name, cluster=cluster.name, operation="creation")
            self._cluster_event(cluster, at, completed, group=group.name)
        cluster.status = "InService"
        self._state_change(cluster, at)
        completed = CLUSTER_COMPLETED.format(cluster=cluster.name, operation="creation")
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
        description = CLUSTER_FAILED.format(cluster=cluster.name, operation="creation")
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
        description = CLUSTER_FAILED.format(cluster=cluster.name, operation="creation")
        self._cluster_event(cluster, at, description, level="Error")
        return True

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
                cluster, node, at, CREATION_FAILED, level="Error", metadata={"Instance": failure}
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
        description = CLUSTER_FAILED.format(cluster=cluster.name, operation="update")
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


def _scale_down_order(nodes: list[Node]) -> list[Node]:
    """Which nodes a scale-down removes first: not yet launched, then unhealthy, then newest."""
    idle = [n for n in nodes if n.operation in (None, "launch", "no_capacity")]
    return sorted(idle, key=lambda n: (n.provisioned, n.healthy, -n.launch_time.timestamp()))
