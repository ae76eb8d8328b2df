"""Who may report for a cluster: its Slurm controller, as the controller group's execution role.

API Gateway (AWS_IAM) has already verified the signature and that the caller may invoke the route;
``requestContext.identity.userArn`` is then the caller's own ARN, which nobody can forge. A report for
cluster ``name`` is accepted only when that ARN is

    arn:<partition>:sts::<account>:assumed-role/<RoleName>/<session>

with the stack's account, ``RoleName`` the name of the ExecutionRole of the cluster's controller
instance group (DescribeCluster), and — when the session name is an instance id, as EC2 names an
instance profile's sessions — one of the controller group's instances. Why the controller only: on a
worker any user's job can read the instance's credentials from IMDS, and could then forge a report
that starts, ends or skips a repair (docs/agent.md, "Trust"). A session not named like an instance
(HyperPod's naming is unverified: docs/sandbox.md) cannot be placed on a node, so it is accepted only
while no other group of the cluster has the controller's role; a role shared with another cluster
cannot be told apart at all (``autopilot validate`` warns of both).

The caller's form and account are checked before SageMaker is asked anything: a caller that is not an
assumed role of the stack's account learns nothing about the cluster (no 404 or 409), only 403.

The controller group is the one whose ``SlurmConfig.NodeType`` is Controller; else ``controller_group``
of the lifecycle scripts' provisioning_parameters.json under a group's ``SourceS3Uri``. Unlike healing's
topology (which errs towards "controller" in a group's name to avoid replacing one), nothing is guessed
here: no controller group found is a 409 naming why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from autopilot_config.models.constraints import NAME_PATTERN
from botocore.exceptions import ClientError

from autopilot import clock
from autopilot.aws import LazyClient, error_code
from autopilot.errors import ConflictError, NotFoundError
from autopilot.logic.healing.topology import PROVISIONING_PARAMETERS

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

_NOT_FOUND = frozenset({"ResourceNotFound", "ResourceNotFoundException"})
_UNREADABLE = frozenset({"NoSuchKey", "NoSuchBucket", "AccessDenied", "403", "404"})
_ASSUMED_ROLE = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/(?P<session>.+)$"
)
# EC2's session name for an instance profile's credentials (HyperPod's: unverified, docs/sandbox.md).
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]+$")
# An agent reports every AgentPollSeconds: a DescribeCluster and a ListClusterNodes for each report would
# spend SageMaker's API rate on heartbeats. A caller found to be the controller is taken as such for this
# long without asking again (so a role taken off the controller group reports for up to a minute more);
# a refusal is always decided on SageMaker's current answer.
ACCEPTED_FOR = timedelta(seconds=60)
# SageMaker's ClusterName, anchored (models/agent.py's CLUSTER_NAME): from the pattern, not the agent's
# models, which LoginTargetsFunction (the login groups' controller lookup) never validates (~5 ms of init).
_CLUSTER_NAME = re.compile(f"^{NAME_PATTERN}$")


class UntrustedReportError(Exception):
    """The caller is not the cluster's controller (answered 403, counted, nothing stored)."""


@dataclass(frozen=True)
class Controller:
    group: str
    role_arn: str
    # the cluster's other groups whose ExecutionRole is this one (their nodes hold its credentials)
    shared_with: tuple[str, ...] = ()

    @property
    def role_name(self) -> str:
        return _role_name(self.role_arn)


def _role_name(role_arn: str) -> str:
    # arn:aws:iam::<account>:role[/<path>]/<name>: an assumed-role ARN carries the name alone (unique in
    # an account whatever the path)
    return role_arn.rsplit("/", 1)[-1]


class ControllerReader:
    """DescribeCluster, ListClusterNodes and provisioning_parameters.json (read once per cluster)."""

    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
    s3: LazyClient[S3Client] = LazyClient("s3")

    def __init__(
        self,
        *,
        sagemaker: SageMakerClient | None = None,
        s3: S3Client | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._sagemaker = sagemaker
        self._s3 = s3
        self._now = now or (lambda: clock.now())  # noqa: PLW0108  (read at each call: the sandbox sets it)
        # cluster ARN -> its provisioning parameters ({} unreadable; they do not change while it runs)
        self._provisioned: dict[str, dict[str, Any]] = {}
        # (cluster, caller ARN) -> when it was last found the controller (see ACCEPTED_FOR)
        self._accepted: dict[tuple[str, str], datetime] = {}

    def accepted_lately(self, cluster_name: str, user_arn: str) -> bool:
        seen = self._accepted.get((cluster_name, user_arn))
        return seen is not None and self._now() - seen < ACCEPTED_FOR

    def accept(self, cluster_name: str, user_arn: str) -> None:
        self._accepted[(cluster_name, user_arn)] = self._now()

    def describe(self, cluster_name: str) -> dict[str, Any]:
        """DescribeCluster; NotFoundError when SageMaker has no such cluster."""
        # a name no cluster can have: not worth SageMaker's ValidationException
        if not _CLUSTER_NAME.match(cluster_name):
            raise NotFoundError(f"cluster {cluster_name!r} not found")
        try:
            return dict(self.sagemaker.describe_cluster(ClusterName=cluster_name))
        except ClientError as exc:
            if error_code(exc) in _NOT_FOUND:
                raise NotFoundError(f"cluster {cluster_name!r} not found") from exc
            raise

    def controller(self, cluster_name: str) -> Controller:
        """The cluster's controller group and its role; ConflictError when it has none Autopilot can name."""
        described = self.describe(cluster_name)
        if "Eks" in (described.get("Orchestrator") or {}):
            raise ConflictError(f"cluster {cluster_name!r} is orchestrated by EKS: it has no Slurm agent")
        groups: list[dict[str, Any]] = [dict(g) for g in described.get("InstanceGroups", [])]
        by_type = [g for g in groups if (g.get("SlurmConfig") or {}).get("NodeType") == "Controller"]
        if by_type:
            group = by_type[0]
        else:
            name = self._provisioned_controller(str(described["ClusterArn"]), groups)
            named = [g for g in groups if g["InstanceGroupName"] == name]
            if not named:
                raise ConflictError(
                    f"cluster {cluster_name!r} has no controller group: no instance group's "
                    f"SlurmConfig.NodeType is Controller and no readable {PROVISIONING_PARAMETERS} "
                    "names one of its groups"
                )
            group = named[0]
        if not group.get("ExecutionRole"):
            raise ConflictError(f"the controller group {group['InstanceGroupName']!r} has no ExecutionRole")
        role_name = _role_name(str(group["ExecutionRole"]))
        return Controller(
            group=str(group["InstanceGroupName"]),
            role_arn=str(group["ExecutionRole"]),
            shared_with=tuple(
                str(g["InstanceGroupName"])
                for g in groups
                if g is not group and _role_name(str(g.get("ExecutionRole") or "")) == role_name
            ),
        )

    def instances(self, cluster_name: str, group: str) -> frozenset[str]:
        """The instance ids of the group's nodes."""
        found: set[str] = set()
        paginator = self.sagemaker.get_paginator("list_cluster_nodes")
        for page in paginator.paginate(ClusterName=cluster_name, InstanceGroupNameContains=group):
            found |= {
                n["InstanceId"] for n in page["ClusterNodeSummaries"] if n["InstanceGroupName"] == group
            }
        return frozenset(found)

    def login_groups(self, cluster_name: str) -> list[str]:
        """The cluster's login groups: ``SlurmConfig.NodeType`` Login, else provisioning_parameters'
        ``login_group``; none on an EKS cluster or one without a login group (nothing guessed)."""
        described = self.describe(cluster_name)
        if "Eks" in (described.get("Orchestrator") or {}):
            return []
        groups: list[dict[str, Any]] = [dict(g) for g in described.get("InstanceGroups", [])]
        by_type = [
            str(g["InstanceGroupName"])
            for g in groups
            if (g.get("SlurmConfig") or {}).get("NodeType") == "Login"
        ]
        if by_type:
            return by_type
        name = self._provisioned_group(str(described["ClusterArn"]), groups, "login_group")
        return [name] if name and name in {g["InstanceGroupName"] for g in groups} else []

    def _provisioned_controller(self, cluster_arn: str, groups: list[dict[str, Any]]) -> str | None:
        return self._provisioned_group(cluster_arn, groups, "controller_group")

    def _provisioned_group(self, cluster_arn: str, groups: list[dict[str, Any]], key: str) -> str | None:
        if cluster_arn not in self._provisioned:
            self._provisioned[cluster_arn] = self._read_parameters(groups)
        value = self._provisioned[cluster_arn].get(key)
        return value if isinstance(value, str) else None

    def _read_parameters(self, groups: list[dict[str, Any]]) -> dict[str, Any]:
        for uri in dict.fromkeys(
            str((g.get("LifeCycleConfig") or {}).get("SourceS3Uri", "")) for g in groups
        ):
            if not uri.startswith("s3://"):
                continue
            bucket, _, prefix = uri[len("s3://") :].partition("/")
            key = f"{prefix.rstrip('/')}/{PROVISIONING_PARAMETERS}".lstrip("/")
            try:
                body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
                parameters = json.loads(body)
            except ClientError as exc:
                if error_code(exc) in _UNREADABLE:
                    continue
                raise
            except ValueError:
                continue
            if isinstance(parameters, dict):
                return parameters
        return {}


def check_reporter(reader: ControllerReader, cluster_name: str, user_arn: str | None, *, account: str) -> str:
    """Raise unless ``user_arn`` may report for the cluster (see the module); returns the session name.
    A caller that is not an assumed role of the stack's account is refused before the cluster is looked
    at; for one that is, NotFoundError / ConflictError (the cluster) come before UntrustedReportError."""
    caller = _ASSUMED_ROLE.match(user_arn or "")
    if caller is None:
        raise UntrustedReportError(
            f"{user_arn} is not an assumed role: only the controller's role may report"
        )
    if caller["account"] != account:
        raise UntrustedReportError(f"{user_arn} is of another account")
    if user_arn and reader.accepted_lately(cluster_name, user_arn):
        return caller["session"]
    session = _check_session(reader, cluster_name, str(user_arn), caller, account=account)
    reader.accept(cluster_name, str(user_arn))
    return session


def _check_session(
    reader: ControllerReader, cluster_name: str, user_arn: str, caller: re.Match[str], *, account: str
) -> str:
    controller = reader.controller(cluster_name)
    if caller["role"] != controller.role_name or controller.role_arn.split(":")[4] != account:
        raise UntrustedReportError(
            f"{user_arn} is not the execution role of the controller group {controller.group!r}"
        )
    session = caller["session"]
    if _INSTANCE_ID.match(session):
        if session not in reader.instances(cluster_name, controller.group):
            raise UntrustedReportError(f"{user_arn}: {session} is not an instance of the controller group")
    elif controller.shared_with:
        # a session that names no instance could come from any node holding the role: a worker's job
        raise UntrustedReportError(
            f"{user_arn}: the session names no instance, and the controller group's role is also the "
            f"ExecutionRole of {', '.join(repr(g) for g in controller.shared_with)}"
        )
    return session
