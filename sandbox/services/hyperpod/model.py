"""The simulated HyperPod resources: clusters, instance groups, nodes, and their AWS-shaped views."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# Node InstanceStatus values in which the instance exists and is billed.
# A node MoveClusterNodes moves keeps its instance (DetachInProgress, AttachInProgress).
_PROVISIONED_STATUSES = frozenset(
    {
        "Running",
        "Failure",
        "SystemUpdating",
        "DeepHealthCheckInProgress",
        "DetachInProgress",
        "AttachInProgress",
    }
)

# Fields of a ClusterInstanceGroupSpecification that DescribeCluster echoes back unchanged.
_ECHOED_GROUP_FIELDS = (
    "InstanceGroupName",
    "InstanceType",
    "LifeCycleConfig",
    "ExecutionRole",
    "InstanceStorageConfigs",
    "OnStartDeepHealthChecks",
    "TrainingPlanArn",
    "OverrideVpcConfig",
    "ScheduledUpdateConfig",
    "SlurmConfig",
    "CapacityRequirements",
    "NetworkInterface",
)
# Specification members DescribeCluster shows as a Current*/Desired* pair (ClusterInstanceGroupDetails
# in botocore's model): once an update has settled both are what was asked.
_PAIRED_GROUP_FIELDS = ("ImageId", "ImageReleaseVersion")


@dataclass(frozen=True)
class HyperPodTimings:
    """Simulated seconds each lifecycle takes (defaults are what AWS typically shows)."""

    create_cluster: float = 20 * 60
    capacity_failure: float = 8 * 60  # until a create / scale-up without capacity gives up
    capacity_retry: float = 5 * 60  # Continuous: from failed launches to the background retry (unverified)
    scale_up: float = 12 * 60
    scale_down: float = 3 * 60
    update_minimum: float = 60  # an UpdateCluster that changes no counts still shows Updating
    reboot_node: float = 5 * 60
    replace_node: float = 10 * 60
    shutdown_node: float = 2 * 60  # a replaced / deleted instance stays ShuttingDown this long
    software_update: float = 15 * 60
    rollback: float = 3 * 60
    delete_cluster: float = 5 * 60
    auto_recovery_delay: float = 60  # NodeRecovery=Automatic: HMA detection to repair start
    # OnStartDeepHealthChecks: a new instance's checks before Running. AWS: "about a couple of hours",
    # "about 2 hours" for every new instance, a replacement included ("Recommended resiliency
    # configurations", HyperPod developer guide); the sandbox clock runs fast while the control plane waits.
    deep_health_check: float = 2 * 60 * 60
    event_delivery: float = 2  # from a change to its event reaching EventBridge (near real time)
    move_detach: float = 2 * 60  # MoveClusterNodes: DetachInProgress in the source group (unverified)
    move_attach: float = 10 * 60  # AttachInProgress in the target group: its lifecycle scripts (unverified)


def utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def iso(value: datetime) -> str:
    """EventBridge's timestamp style: 2025-01-01T12:00:00.000Z."""
    return utc(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def epoch_millis(value: datetime) -> int:
    """How HyperPod's events carry a time (CreationTime, EventTime): epoch milliseconds, a number."""
    return int(utc(value).timestamp() * 1000)


def jsonable(value: Any) -> Any:
    """A response dict made JSON-ready the way AWS renders an event detail."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


@dataclass
class Node:
    instance_id: str
    group_name: str
    instance_type: str
    launch_time: datetime
    private_ip: str
    hostname_suffix: str
    availability_zone: str
    status: str = "Pending"
    message: str = ""
    resting_status: str = "Running"  # where the instance returns after a transient operation
    provisioned: bool = False  # the instance has come up once (it is billed from then on)
    operation: str | None = None  # launch | reboot | replace | shutdown | software
    healthy: bool = True
    fault_type: str | None = None
    health_reason: str = ""
    needed_repair: str = ""  # what the fault needs: Reboot | Replace ("" while healthy)
    auto_repair: bool = False  # HyperPod repairs it itself (NodeRecovery Automatic)
    # What its Node Health events say as RepairAction instead of the repair HyperPod makes (a fault's
    # ``repair_action``, or the seeded share of "None" on Automatic clusters); None: no override.
    repair_action_override: str | None = None
    recommendation: str = ""
    reboot_heals: bool = True
    replaced_by: str | None = None
    last_software_update: datetime | None = None

    @property
    def billable(self) -> bool:
        return self.provisioned and (self.status in _PROVISIONED_STATUSES or self.operation == "reboot")

    def hostname(self) -> str:
        return "ip-" + self.private_ip.replace(".", "-") + "." + self.hostname_suffix

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "InstanceGroupName": self.group_name,
            "InstanceId": self.instance_id,
            "InstanceType": self.instance_type,
            "LaunchTime": self.launch_time,
            "InstanceStatus": self.instance_status(),
            "PrivateDnsHostname": self.hostname(),
        }
        if self.last_software_update is not None:
            summary["LastSoftwareUpdateTime"] = self.last_software_update
        return summary

    def instance_status(self) -> dict[str, str]:
        status = {"Status": self.status}
        if self.message:
            status["Message"] = self.message
        return status


@dataclass
class InstanceGroup:
    spec: dict[str, Any]  # the ClusterInstanceGroupSpecification as requested
    target_count: int
    status: str = "Creating"

    @property
    def name(self) -> str:
        return str(self.spec["InstanceGroupName"])

    @property
    def instance_type(self) -> str:
        """The group's instance type; a flexible group's (InstanceRequirements) first listed one."""
        if "InstanceRequirements" in self.spec:
            return str(self.spec["InstanceRequirements"]["InstanceTypes"][0])
        return str(self.spec["InstanceType"])

    def is_slurm_controller(self) -> bool:
        return bool(self.spec.get("SlurmConfig", {}).get("NodeType") == "Controller")


@dataclass
class Cluster:
    cluster_id: str
    name: str
    arn: str
    creation_time: datetime
    request: dict[str, Any]  # the CreateCluster request (VpcConfig, Orchestrator, ...)
    groups: dict[str, InstanceGroup]
    status: str = "Creating"
    failure_message: str = ""
    node_recovery: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    controller_groups: frozenset[str] = frozenset()
    login_groups: frozenset[str] = frozenset()  # Slurm login nodes: no slurmd on them
    operation_token: int = 0  # bumps with every cluster-level operation; stale timers compare it
    needs_software_update: bool = False  # an "older cluster": no BatchReplaceClusterNodes until patched
    capacity_retry_due: bool = False  # Continuous: a background retry of failed launches is scheduled

    def group_nodes(self, group_name: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.group_name == group_name]

    def current_count(self, group_name: str) -> int:
        return sum(
            1 for n in self.group_nodes(group_name) if n.provisioned and n.operation not in ("shutdown",)
        )

    @property
    def continuous(self) -> bool:
        """Only clusters with NodeProvisioningMode Continuous have cluster events (AWS's docs)."""
        return self.request.get("NodeProvisioningMode") == "Continuous"

    def state_change_detail(self) -> dict[str, Any]:
        """The detail of a Cluster State Change event: DescribeCluster as AWS's sample renders it."""
        detail: dict[str, Any] = jsonable(self.describe())
        detail["CreationTime"] = epoch_millis(self.creation_time)
        detail["FailureMessage"] = self.failure_message  # always present, "" when none
        return detail

    def describe(self) -> dict[str, Any]:
        description: dict[str, Any] = {
            "ClusterArn": self.arn,
            "ClusterName": self.name,
            "ClusterStatus": self.status,
            "CreationTime": self.creation_time,
            "InstanceGroups": [self._describe_group(g) for g in self.groups.values()],
        }
        if self.failure_message:
            description["FailureMessage"] = self.failure_message
        for key in (
            "VpcConfig",
            "Orchestrator",
            "TieredStorageConfig",
            "NodeProvisioningMode",
            "ClusterRole",
        ):
            if key in self.request:
                description[key] = self.request[key]
        if self.node_recovery is not None:
            description["NodeRecovery"] = self.node_recovery
        return description

    def _describe_group(self, group: InstanceGroup) -> dict[str, Any]:
        spec = group.spec
        details = {k: spec[k] for k in _ECHOED_GROUP_FIELDS if k in spec}
        for key in _PAIRED_GROUP_FIELDS:
            if key in spec:
                details[f"Current{key}"] = details[f"Desired{key}"] = spec[key]
        if "InstanceRequirements" in spec:
            types = spec["InstanceRequirements"]["InstanceTypes"]
            details["InstanceRequirements"] = {"CurrentInstanceTypes": types, "DesiredInstanceTypes": types}
        if "KubernetesConfig" in spec:
            details["KubernetesConfig"] = {
                f"{when}{key}": value
                for key, value in spec["KubernetesConfig"].items()
                for when in ("Current", "Desired")
            }
        if "AutoPatchConfig" in spec:
            patch = dict(spec["AutoPatchConfig"])
            schedule = patch.pop("PatchSchedule", None)
            if schedule is not None:
                patch["CurrentPatchSchedule"] = patch["DesiredPatchSchedule"] = schedule
            details["AutoPatchConfig"] = patch
        details["ThreadsPerCore"] = group.spec.get("ThreadsPerCore", 1)
        details["CurrentCount"] = self.current_count(group.name)
        details["TargetCount"] = group.target_count
        details["Status"] = group.status
        if "MinInstanceCount" in group.spec:
            details["MinCount"] = group.spec["MinInstanceCount"]
        return details

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "ClusterArn": self.arn,
            "ClusterName": self.name,
            "CreationTime": self.creation_time,
            "ClusterStatus": self.status,
        }
        plans = [g.spec["TrainingPlanArn"] for g in self.groups.values() if "TrainingPlanArn" in g.spec]
        if plans:
            summary["TrainingPlanArns"] = plans
        return summary

    def describe_node(self, node: Node) -> dict[str, Any]:
        group = self.groups.get(node.group_name)
        spec = group.spec if group is not None else {}
        details: dict[str, Any] = {
            "InstanceGroupName": node.group_name,
            "InstanceId": node.instance_id,
            "InstanceStatus": node.instance_status(),
            "InstanceType": node.instance_type,
            "LaunchTime": node.launch_time,
            "ThreadsPerCore": spec.get("ThreadsPerCore", 1),
            "PrivatePrimaryIp": node.private_ip,
            "PrivateDnsHostname": node.hostname(),
            "Placement": {"AvailabilityZone": node.availability_zone},
        }
        for key in ("LifeCycleConfig", "InstanceStorageConfigs", "OverrideVpcConfig"):
            if key in spec:
                details[key] = spec[key]
        if node.last_software_update is not None:
            details["LastSoftwareUpdateTime"] = node.last_software_update
        return details
