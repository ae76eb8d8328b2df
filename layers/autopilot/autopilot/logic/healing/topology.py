"""A cluster's shape as healing needs it: how many nodes it has (the breaker's denominator) and which
instance groups hold the Slurm controller and the login nodes (never replaced / reboot only).

The roles come from where HyperPod itself takes them: an instance group's ``SlurmConfig.NodeType``
(Controller | Login | Compute) when the cluster was created with it; else the lifecycle scripts'
``provisioning_parameters.json`` (``controller_group``, ``login_group``) next to the group's
``LifeCycleConfig.SourceS3Uri``; else, when neither can be read, the workshops' naming (a group whose
name contains "controller" / "login"), which errs on the side of not replacing a node.
EKS clusters have no controller or login groups.

It also says who repairs a faulty node and how long a new instance takes, both read from the same
DescribeCluster: ``NodeRecovery`` (Automatic: HyperPod reboots or replaces it itself; read per event,
since UpdateCluster can change it) and each group's ``OnStartDeepHealthChecks`` (every new instance of
such a group, a replacement included, runs about two hours of stress tests before it serves).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict

from autopilot.aws import LazyClient, error_code
from autopilot.logic.healing.decide import NodeRole

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

PROVISIONING_PARAMETERS = "provisioning_parameters.json"
_NOT_FOUND = frozenset({"ResourceNotFound", "ResourceNotFoundException"})
# What S3 answers for a provisioning_parameters.json Autopilot cannot read: fall back on the names.
_UNREADABLE = frozenset({"NoSuchKey", "NoSuchBucket", "AccessDenied", "403", "404"})


class ClusterTopology(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    # the sum of the instance groups' CurrentCount
    node_count: int
    controller_groups: frozenset[str]
    login_groups: frozenset[str]
    # NodeRecovery Automatic: HyperPod repairs a faulty node itself, whatever an event's RepairAction says.
    automatic_recovery: bool = False
    # The instance groups with OnStartDeepHealthChecks: their new instances are checked before Running.
    deep_health_groups: frozenset[str] = frozenset()

    def role(self, instance_group: str | None) -> NodeRole:
        if instance_group in self.controller_groups:
            return NodeRole.CONTROLLER
        if instance_group in self.login_groups:
            return NodeRole.LOGIN
        return NodeRole.WORKER

    def deep_health_checks(self, instance_group: str | None) -> bool:
        return instance_group in self.deep_health_groups


class TopologyReader:
    """DescribeCluster / DescribeClusterNode, and the lifecycle's provisioning_parameters.json."""

    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
    s3: LazyClient[S3Client] = LazyClient("s3")

    def __init__(self, *, sagemaker: SageMakerClient | None = None, s3: S3Client | None = None) -> None:
        self._sagemaker = sagemaker
        self._s3 = s3
        # A lifecycle prefix's provisioning parameters do not change while a cluster runs on them.
        self._provisioning: dict[str, dict[str, Any] | None] = {}

    def cluster(self, cluster_name: str) -> ClusterTopology | None:
        """The cluster's topology now; None when SageMaker has no such cluster."""
        try:
            described = self.sagemaker.describe_cluster(ClusterName=cluster_name)
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND:
                return None
            raise
        groups: list[Any] = list(described.get("InstanceGroups", []))
        controller, login = self._roles(groups, eks="Eks" in described.get("Orchestrator", {}))
        return ClusterTopology(
            node_count=sum(int(g.get("CurrentCount") or 0) for g in groups),
            controller_groups=controller,
            login_groups=login,
            # Autopilot's clusters always say it (validation requires NodeRecovery).
            # No NodeRecovery described: AWS's default, Automatic (validation lets a create leave it out,
            # with a warning saying so); reading it as None would make HyperPod and Autopilot both repair.
            automatic_recovery=described.get("NodeRecovery", "Automatic") == "Automatic",
            deep_health_groups=frozenset(
                str(g["InstanceGroupName"]) for g in groups if g.get("OnStartDeepHealthChecks")
            ),
        )

    def node_group(self, cluster_name: str, node_id: str) -> str | None:
        """The node's instance group; None when SageMaker has no such node."""
        try:
            described = self.sagemaker.describe_cluster_node(ClusterName=cluster_name, NodeId=node_id)
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND:
                return None
            raise
        return str(described["NodeDetails"]["InstanceGroupName"])

    def _roles(self, groups: list[Any], *, eks: bool) -> tuple[frozenset[str], frozenset[str]]:
        by_type: dict[str, set[str]] = {"Controller": set(), "Login": set()}
        for group in groups:
            node_type = (group.get("SlurmConfig") or {}).get("NodeType")
            if node_type in by_type:
                by_type[node_type].add(group["InstanceGroupName"])
        if eks or any((g.get("SlurmConfig") or {}).get("NodeType") for g in groups):
            return frozenset(by_type["Controller"]), frozenset(by_type["Login"])
        for group in groups:
            parameters = self._provisioning_parameters(
                str((group.get("LifeCycleConfig") or {}).get("SourceS3Uri", ""))
            )
            if parameters and parameters.get("controller_group"):
                login = parameters.get("login_group")
                return (
                    frozenset({str(parameters["controller_group"])}),
                    frozenset({str(login)}) if login else frozenset(),
                )
        names = [str(g["InstanceGroupName"]) for g in groups]
        return (
            frozenset(n for n in names if "controller" in n.lower()),
            frozenset(n for n in names if "login" in n.lower()),
        )

    def _provisioning_parameters(self, source_uri: str) -> dict[str, Any] | None:
        if not source_uri.startswith("s3://"):
            return None
        if source_uri not in self._provisioning:
            self._provisioning[source_uri] = self._read_provisioning_parameters(source_uri)
        return self._provisioning[source_uri]

    def _read_provisioning_parameters(self, source_uri: str) -> dict[str, Any] | None:
        bucket, _, prefix = source_uri[len("s3://") :].partition("/")
        key = f"{prefix.rstrip('/')}/{PROVISIONING_PARAMETERS}".lstrip("/")
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if error_code(exc) in _UNREADABLE:
                return None
            raise
        try:
            parameters = json.loads(body)
        except ValueError:
            return None
        return parameters if isinstance(parameters, dict) else None
