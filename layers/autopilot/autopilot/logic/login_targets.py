"""Login nodes kept behind their load balancer (issue 25; docs/operations.md, "Login nodes behind a load
balancer").

A cluster created with ``loginTargetGroupArns`` has its login group's node IPs registered in each of those
ELBv2 target groups (target type ``ip``) on the port the target group uses. ``sync`` makes a group hold
exactly the login nodes SageMaker lists: it is what the Create workflow calls once the cluster is
InService, what ReplaceNode calls before a replaced node's repair may succeed (the successor in, the old
IP out), what the Cleanup workflow calls with no nodes (deregister all) and what the healing sweep calls
to repair drift (a target someone removed, a stale IP left by a scale-down or a replacement Autopilot did
not make). The login group is found as the agent's trust finds the controller group
(``ControllerReader``), nothing guessed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from autopilot.aws import LazyClient, error_code
from autopilot.dal.state_store import StateStore
from autopilot.logic.agent.trust import ControllerReader
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

# An ELBv2 target group's ARN; account and region are checked against the stack's.
TARGET_GROUP_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):elasticloadbalancing:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"targetgroup/(?P<name>[A-Za-z0-9-]{1,32})/[0-9a-f]+$"
)
MAX_TARGET_GROUPS = 5
# A node in these states has an IP a load balancer may send users to (a rebooting or updating login node
# keeps its registration: deregistering it for minutes would only drain users' sessions twice).
_SERVING = frozenset({"Running", "SystemUpdating", "DeepHealthCheckInProgress", "Pending"})
# DescribeTargetHealth states of a target already on its way out: not "registered" for the diff.
_LEAVING = frozenset({"draining", "unhealthy.draining"})


@dataclass(frozen=True, order=True)
class Target:
    id: str
    port: int


@dataclass
class Drift:
    """What ``sync`` changed in one target group."""

    target_group_arn: str
    registered: list[Target] = field(default_factory=list)
    deregistered: list[Target] = field(default_factory=list)


def plan(wanted_ips: Iterable[str], port: int, present: Iterable[tuple[Target, str]]) -> Drift:
    """The targets to register and deregister so that a group holds ``wanted_ips`` on ``port``.
    ``present``: each registered target with its DescribeTargetHealth state; one already draining is
    not in the group (registered again when wanted, left to drain when not)."""
    want = {Target(ip, port) for ip in wanted_ips}
    have = {target for target, state in present if state not in _LEAVING}
    drift = Drift("")
    drift.registered = sorted(want - have)
    drift.deregistered = sorted(have - want)
    return drift


def check_target_group_arns(arns: Sequence[str], *, account: str, region: str) -> list[tuple[int, str]]:
    """(index, problem) for each ARN that is not an ELBv2 target group of this account and region."""
    problems: list[tuple[int, str]] = []
    for i, arn in enumerate(arns):
        match = TARGET_GROUP_ARN.match(arn)
        if match is None:
            problems.append((i, "is not an ELBv2 target group ARN"))
        elif match["account"] != account or match["region"] != region:
            problems.append((i, f"is not a target group of account {account} in {region}"))
        elif arn in arns[:i]:
            problems.append((i, "is named twice"))
    return problems


class LoginTargets:
    """ELBv2 and SageMaker calls for the login target groups of one cluster at a time."""

    # No mypy-boto3 stubs for elbv2 in the lock: typed as Any (the calls pass botocore's validation).
    elbv2: LazyClient[Any] = LazyClient("elbv2")
    ec2: LazyClient[EC2Client] = LazyClient("ec2")

    def __init__(
        self,
        *,
        elbv2: Any | None = None,
        ec2: EC2Client | None = None,
        reader: ControllerReader | None = None,
    ) -> None:
        self._elbv2 = elbv2
        self._ec2 = ec2
        self.reader = reader or ControllerReader()

    def _subnets(self, vpc_id: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        """The CIDR blocks of the VPC's subnets: an IP in none of them is registered with AvailabilityZone
        'all' (ELBv2 refuses it without; and 'all' for an IP inside the VPC)."""
        paginator = self.ec2.get_paginator("describe_subnets")
        return [
            ipaddress.ip_network(subnet["CidrBlock"])
            for page in paginator.paginate(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
            for subnet in page["Subnets"]
        ]

    def describe_groups(self, arns: Sequence[str]) -> dict[str, dict[str, Any]]:
        """DescribeTargetGroups by ARN (raises the ClientError of an unknown one)."""
        found = self.elbv2.describe_target_groups(TargetGroupArns=list(arns))["TargetGroups"]
        return {str(g["TargetGroupArn"]): dict(g) for g in found}

    def login_ips(self, cluster_name: str) -> dict[str, str]:
        """Instance id -> private IP of each serving node of the cluster's login groups."""
        sagemaker = self.reader.sagemaker
        ips: dict[str, str] = {}
        for group in self.reader.login_groups(cluster_name):
            paginator = sagemaker.get_paginator("list_cluster_nodes")
            for page in paginator.paginate(ClusterName=cluster_name, InstanceGroupNameContains=group):
                for node in page["ClusterNodeSummaries"]:
                    if node["InstanceGroupName"] != group:
                        continue
                    if node["InstanceStatus"]["Status"] not in _SERVING:
                        continue
                    described = sagemaker.describe_cluster_node(
                        ClusterName=cluster_name, NodeId=node["InstanceId"]
                    )["NodeDetails"]
                    if described.get("PrivatePrimaryIp"):
                        ips[node["InstanceId"]] = str(described["PrivatePrimaryIp"])
        return ips

    def present(self, target_group_arn: str) -> list[tuple[Target, str]]:
        """The group's registered targets with their health state."""
        health = self.elbv2.describe_target_health(TargetGroupArn=target_group_arn)
        return [
            (Target(str(d["Target"]["Id"]), int(d["Target"]["Port"])), str(d["TargetHealth"]["State"]))
            for d in health["TargetHealthDescriptions"]
        ]

    def sync(self, target_group_arns: Sequence[str], wanted_ips: Iterable[str]) -> list[Drift]:
        """Make each group hold ``wanted_ips`` on its port; what changed, per group."""
        wanted = sorted(set(wanted_ips))
        drifts: list[Drift] = []
        for arn, group in self.describe_groups(target_group_arns).items():
            drift = plan(wanted, int(group["Port"]), self.present(arn))
            drift.target_group_arn = arn
            if drift.registered:
                subnets = self._subnets(str(group["VpcId"]))
                self.elbv2.register_targets(
                    TargetGroupArn=arn,
                    Targets=[
                        {"Id": t.id, "Port": t.port}
                        if any(ipaddress.ip_address(t.id) in subnet for subnet in subnets)
                        else {"Id": t.id, "Port": t.port, "AvailabilityZone": "all"}
                        for t in drift.registered
                    ],
                )
            if drift.deregistered:
                self.elbv2.deregister_targets(
                    TargetGroupArn=arn, Targets=[{"Id": t.id, "Port": t.port} for t in drift.deregistered]
                )
            drifts.append(drift)
        return drifts

    def sync_cluster(self, cluster_name: str, target_group_arns: Sequence[str]) -> list[Drift]:
        return self.sync(target_group_arns, self.login_ips(cluster_name).values())

    def health(self, target_group_arns: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """IP -> [{targetGroupArn, port, state}] of every target registered in the groups."""
        by_ip: dict[str, list[dict[str, Any]]] = {}
        for arn in target_group_arns:
            for target, state in self.present(arn):
                by_ip.setdefault(target.id, []).append(
                    {"targetGroupArn": arn, "port": target.port, "state": state}
                )
        return by_ip


def target_group_problems(
    targets: LoginTargets, arns: Sequence[str], *, account: str, region: str
) -> list[tuple[int, str]]:
    """POST /clusters' check of ``loginTargetGroupArns``: (index, problem) for each ARN that is not an
    existing ``ip`` target group of this account and region (one DescribeTargetGroups each, ≤ 5)."""
    problems = check_target_group_arns(arns, account=account, region=region)
    named = {i for i, _ in problems}
    for i, arn in enumerate(arns):
        if i in named:
            continue
        try:
            group = targets.describe_groups([arn]).get(arn)
        except ClientError as exc:
            if error_code(exc) not in {"TargetGroupNotFound", "TargetGroupNotFoundException"}:
                raise
            group = None
        if group is None:
            problems.append((i, "no such target group"))
        elif group.get("TargetType") != "ip":
            problems.append((i, f"has target type {group.get('TargetType')!r}: login nodes need 'ip'"))
    return sorted(problems)


class KeepTargetsRequest(BaseModel):
    """LoginTargetsFunction's event (from the Create, ReplaceNode and Cleanup workflows)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str
    # The Create workflow names them (the record has them too); others leave them to the record.
    target_group_arns: list[str] | None = None
    # Cleanup: the cluster is going, every target leaves its groups.
    deregister_all: bool = False


def keep_targets(request: KeepTargetsRequest, *, store: StateStore, targets: LoginTargets) -> dict[str, Any]:
    """Register / deregister so the cluster's login target groups hold its login nodes (none when
    ``deregister_all``). A cluster without login target groups: nothing done."""
    arns = request.target_group_arns
    if arns is None:
        cluster = store.get_cluster(request.cluster_name)
        arns = (cluster.login_target_group_arns if cluster else None) or []
    if not arns:
        return {"targetGroups": 0, "registered": [], "deregistered": []}
    wanted = [] if request.deregister_all else list(targets.login_ips(request.cluster_name).values())
    drifts = targets.sync(arns, wanted)
    registered = sorted({t.id for d in drifts for t in d.registered})
    deregistered = sorted({t.id for d in drifts for t in d.deregistered})
    logger.info(
        "login target groups kept",
        cluster=request.cluster_name,
        target_groups=arns,
        registered=registered,
        deregistered=deregistered,
    )
    return {"targetGroups": len(arns), "registered": registered, "deregistered": deregistered}
