"""The SageMaker operations the HyperPod simulator answers that are not a cluster lifecycle's start:
Describe/List of clusters, nodes and cluster events, the Batch* node operations, MoveClusterNodes,
tags, and List* pagination. ``handler(operation)`` names the method serving each operation (the
cluster lifecycles' own calls, CreateCluster..., are in cluster_lifecycle.py).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, ClassVar

from sandbox.services.hyperpod.events import TERMINATING
from sandbox.services.hyperpod.injection import FaultInjection
from sandbox.services.hyperpod.model import Cluster, Node, utc
from sandbox.services.hyperpod.node_lifecycle import TAKES_REPAIR
from sandbox.services.hyperpod.state import Params, not_found
from sandbox.services.hyperpod.validation import validation_error

_DEFAULT_PAGE_SIZE = 10  # SageMaker's List* default when MaxResults is left out
_BUSY = frozenset({"reboot", "replace", "software", "shutdown", "move"})
_SOFTWARE_UPDATE_NEEDED = (
    "Cluster {cluster} must be patched before nodes can be replaced: run UpdateClusterSoftware on the "
    "cluster, then call BatchReplaceClusterNodes again."
)


def _unique(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


class ApiHandlers(FaultInjection):
    """The read, node and tag operations and pagination (a base of ``HyperPodSimulator``)."""

    # The method serving each operation the seam routes here (operations.HYPERPOD_OPERATIONS).
    _OPERATIONS: ClassVar[dict[str, str]] = {
        "CreateCluster": "_create_cluster",
        "DescribeCluster": "_describe_cluster",
        "ListClusters": "_list_clusters",
        "UpdateCluster": "_update_cluster",
        "DeleteCluster": "_delete_cluster",
        "UpdateClusterSoftware": "_update_cluster_software",
        "ListClusterNodes": "_list_cluster_nodes",
        "DescribeClusterNode": "_describe_cluster_node",
        "BatchDeleteClusterNodes": "_batch_delete_cluster_nodes",
        "BatchRebootClusterNodes": "_batch_reboot_cluster_nodes",
        "BatchReplaceClusterNodes": "_batch_replace_cluster_nodes",
        "MoveClusterNodes": "_move_cluster_nodes",
        "ListClusterEvents": "_list_cluster_events",
        "DescribeClusterEvent": "_describe_cluster_event",
        "AddTags": "_add_tags",
        "ListTags": "_list_tags",
        "DeleteTags": "_delete_tags",
    }

    def handler(self, operation: str) -> Callable[[Params], dict[str, Any]] | None:
        """The bound method serving ``operation``, None for one the simulator does not serve."""
        name = self._OPERATIONS.get(operation)
        if name is None:
            return None
        method: Callable[[Params], dict[str, Any]] = getattr(self, name)
        return method

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
            raise not_found(f"Node {node_id} not found in cluster {cluster.arn}.")
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
        if node.status not in TAKES_REPAIR or node.operation is not None:
            return "InvalidInstanceStatus", f"Instance {node_id} is in {node.status} status."
        return None

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
                self._instance_event(cluster, node, at, TERMINATING)
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
        raise not_found(f"Event {params['EventId']} not found for cluster {cluster.name}.")

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


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return utc(value)
    return utc(datetime.fromtimestamp(float(value)))


def _batch_result(successful: list[str], failed: list[dict[str, str]]) -> dict[str, Any]:
    result: dict[str, Any] = {"Failed": failed}
    if successful:
        result["Successful"] = successful
    return result
