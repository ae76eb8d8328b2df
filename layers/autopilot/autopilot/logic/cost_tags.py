"""Cost tags that stay true: CostTaggerFunction's use cases (docs/operations.md, "Cost tracking").

The tag set (``ClusterName``, and the owner / project / cost-center keys of CostTagKeys when the
cluster has them) goes on the cluster ARN and on what the cluster uses in the account: its lifecycle
buckets, the FSx file systems its provisioning parameters name, its security groups, and the network
interfaces HyperPod placed in its subnets. A tag removed or changed by hand is put back.

Resources are often shared (one lifecycle bucket, one FSx file system, one security group for several
clusters). A resource carries one ``ClusterName``: the first cluster to tag it keeps it while that
cluster is registered and not deleted, and the others leave it alone (``shared``) rather than take it
over on every sweep. Only the cost tags are written: a bucket's other tags are merged, never dropped.

A resource a cluster names need not be its team's: a config may name another team's security group or
bucket. A resource whose owner, project or cost-center tag already holds another value is left wholly
alone (``conflicts``, a warning), at create and by the drift sweep alike: re-tagging it would move
another team's costs, and the repair would keep them moved. Only the cluster's own ARN, which Autopilot
created with these tags, is always put right.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from autopilot.aws import LazyClient
from autopilot.dal.state_store import every_cluster
from autopilot.emitted_events import put_event
from autopilot.models.cost_allocation import (
    TAG_CLUSTER_NAME,
    CostTagKeys,
    cost_tag_set,
    project_budget_name_for,
)
from autopilot.models.records import Cluster, ClusterStatus
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_budgets import BudgetsClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_fsx import FSxClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

    from autopilot.dal.cost_tags import TagRepairRecords
    from autopilot.dal.state_store import StateStore

COST_TAGS_REPAIRED = "Cost Tags Repaired"
S3_MAX_TAGS = 50
# A resource that is gone (or never existed) is reported, not an error: a cluster may outlive its bucket.
NOT_FOUND = frozenset(
    {
        "NoSuchBucket",
        "FileSystemNotFound",
        "InvalidGroup.NotFound",
        "InvalidGroupId.Malformed",
        "InvalidNetworkInterfaceID.NotFound",
    }
)
# Clusters that may still run, so may still hold a shared resource's ClusterName tag.
LIVE_STATUSES = frozenset(
    {ClusterStatus.CREATING, ClusterStatus.ACTIVE, ClusterStatus.DELETING, ClusterStatus.DELETE_FAILED}
)
KEEPS_PROJECT_BUDGET = LIVE_STATUSES - {ClusterStatus.DELETING}


class ResourceKind(StrEnum):
    CLUSTER = "cluster"
    BUCKET = "s3-bucket"
    FILE_SYSTEM = "fsx-file-system"
    SECURITY_GROUP = "security-group"
    NETWORK_INTERFACE = "network-interface"


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class TagChange(_Model):
    """Tags one resource got: ``set`` the new values, ``previous`` what those keys held (absent: none)."""

    resource: str
    kind: ResourceKind
    set: dict[str, str]
    previous: dict[str, str]


class TagReport(_Model):
    """What tagging a cluster's resources did: changed, left to another cluster, left to the owner its
    tags name (``conflicts``: ``<ARN>: <key>=<value>, ...``), not found, failed."""

    cluster_name: str
    changes: list[TagChange] = Field(default_factory=list)
    shared: list[str] = Field(default_factory=list)
    conflicts: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)


class CostTagClients:
    """The AWS clients the cost tagger reaches (injected in tests, created on first use otherwise)."""

    sagemaker: LazyClient[SageMakerClient] = LazyClient("sagemaker")
    s3: LazyClient[S3Client] = LazyClient("s3")
    fsx: LazyClient[FSxClient] = LazyClient("fsx")
    ec2: LazyClient[EC2Client] = LazyClient("ec2")
    budgets: LazyClient[BudgetsClient] = LazyClient("budgets")
    events: LazyClient[EventBridgeClient] = LazyClient("events")

    def __init__(
        self,
        *,
        sagemaker: SageMakerClient | None = None,
        s3: S3Client | None = None,
        fsx: FSxClient | None = None,
        ec2: EC2Client | None = None,
        budgets: BudgetsClient | None = None,
        events: EventBridgeClient | None = None,
    ) -> None:
        self._sagemaker = sagemaker
        self._s3 = s3
        self._fsx = fsx
        self._ec2 = ec2
        self._budgets = budgets
        self._events = events


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _as_dict(tags: list[Any] | None) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or []}


def _as_list(tags: Mapping[str, str]) -> list[Any]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


@dataclass(frozen=True)
class _Target:
    """One taggable resource: how to read its tags and write the ones wanted (``current`` beside them)."""

    resource: str
    kind: ResourceKind
    read: Callable[[], dict[str, str]]
    write: Callable[[dict[str, str], dict[str, str]], object]


class _Tagger:
    """One cluster's pass over its resources (``_live`` caches whether a holder cluster still runs)."""

    def __init__(
        self, cluster: Cluster, desired: dict[str, str], store: StateStore, *, keys: CostTagKeys
    ) -> None:
        self.cluster = cluster
        self.desired = desired
        self.owned_keys = (keys.owner, keys.project, keys.cost_center)
        self.store = store
        self.report = TagReport(cluster_name=cluster.cluster_name)
        self._live: dict[str, bool] = {}

    def _held_by_other(self, current: Mapping[str, str]) -> bool:
        holder = current.get(TAG_CLUSTER_NAME)
        if not holder or holder == self.cluster.cluster_name:
            return False
        if holder not in self._live:
            other = self.store.get_cluster(holder)
            self._live[holder] = other is not None and other.status in LIVE_STATUSES
        return self._live[holder]

    def _foreign(self, current: Mapping[str, str]) -> dict[str, str]:
        """The owner / project / cost-center tags the resource holds with another value than ours."""
        return {
            k: current[k]
            for k in self.owned_keys
            if k in current and k in self.desired and current[k] != self.desired[k]
        }

    def reconcile(self, target: _Target) -> None:
        """Read the resource's tags, and write the cost tags that are missing or differ."""
        try:
            current = target.read()
        except ResourceMissing:
            self.report.missing.append(target.resource)
            return
        except ClientError as exc:
            if _code(exc) in NOT_FOUND:
                self.report.missing.append(target.resource)
            else:
                self.report.failures.append(f"{target.resource}: {_code(exc)}")
            return
        if target.kind is not ResourceKind.CLUSTER and self._held_by_other(current):
            self.report.shared.append(target.resource)
            return
        if target.kind is not ResourceKind.CLUSTER and (foreign := self._foreign(current)):
            self.report.conflicts.append(
                f"{target.resource}: " + ", ".join(f"{k}={v}" for k, v in foreign.items())
            )
            return
        wanted = {k: v for k, v in self.desired.items() if current.get(k) != v}
        if not wanted:
            return
        try:
            target.write(wanted, current)
        except ClientError as exc:
            self.report.failures.append(f"{target.resource}: {_code(exc)}")
            return
        except TooManyTags as exc:
            self.report.failures.append(f"{target.resource}: {exc}")
            return
        previous = {k: current[k] for k in wanted if k in current}
        self.report.changes.append(
            TagChange(resource=target.resource, kind=target.kind, set=wanted, previous=previous)
        )


class TooManyTags(ValueError):
    """Merging the cost tags would take a bucket past S3's 50 tags."""


class ResourceMissing(LookupError):
    """A resource the cluster names does not exist (any more)."""


def _arn_parts(cluster_arn: str) -> tuple[str, str, str, str]:
    """(partition, region, account, cluster id) of ``arn:<p>:sagemaker:<region>:<account>:cluster/<id>``."""
    parts = cluster_arn.split(":")
    return parts[1], parts[3], parts[4], parts[5].split("/", 1)[1]


def lifecycle_buckets(description: Mapping[str, Any]) -> list[str]:
    """The S3 buckets of the instance groups' LifeCycleConfig.SourceS3Uri (s3://<bucket>/<prefix>)."""
    buckets: list[str] = []
    for group in description.get("InstanceGroups") or []:
        uri = str((group.get("LifeCycleConfig") or {}).get("SourceS3Uri", ""))
        if uri.startswith("s3://"):
            bucket = uri[len("s3://") :].split("/", 1)[0]
            if bucket and bucket not in buckets:
                buckets.append(bucket)
    return buckets


def _network_interfaces(ec2: EC2Client, description: Mapping[str, Any], cluster_id: str) -> Iterator[Any]:
    """The ENIs in the cluster's subnets with its security groups whose description names the cluster's
    id (how AWS describes HyperPod's ENIs is unverified: docs/sandbox.md)."""
    vpc = description.get("VpcConfig") or {}
    if not vpc.get("Subnets") or not vpc.get("SecurityGroupIds"):
        return
    pages = ec2.get_paginator("describe_network_interfaces").paginate(
        Filters=[
            {"Name": "subnet-id", "Values": list(vpc["Subnets"])},
            {"Name": "group-id", "Values": list(vpc["SecurityGroupIds"])},
            {"Name": "description", "Values": [f"*{cluster_id}*"]},
        ]
    )
    for page in pages:
        yield from page.get("NetworkInterfaces", [])


def _targets(cluster: Cluster, description: Mapping[str, Any], clients: CostTagClients) -> Iterator[_Target]:
    cluster_arn = str(description["ClusterArn"])
    partition, region, account, cluster_id = _arn_parts(cluster_arn)
    sagemaker, s3, fsx, ec2 = clients.sagemaker, clients.s3, clients.fsx, clients.ec2
    yield _Target(
        cluster_arn,
        ResourceKind.CLUSTER,
        lambda: _as_dict(sagemaker.list_tags(ResourceArn=cluster_arn, MaxResults=100).get("Tags")),
        lambda wanted, _: sagemaker.add_tags(ResourceArn=cluster_arn, Tags=_as_list(wanted)),
    )
    for bucket in lifecycle_buckets(description):
        yield _Target(
            f"arn:{partition}:s3:::{bucket}",
            ResourceKind.BUCKET,
            partial(_bucket_tags, s3, bucket),
            partial(_put_bucket_tags, s3, bucket),
        )
    for file_system_id in cluster.file_system_ids or []:
        file_system_arn = f"arn:{partition}:fsx:{region}:{account}:file-system/{file_system_id}"
        yield _Target(
            file_system_arn,
            ResourceKind.FILE_SYSTEM,
            partial(_file_system_tags, fsx, file_system_id),
            partial(_tag_file_system, fsx, file_system_arn),
        )
    for group_id in (description.get("VpcConfig") or {}).get("SecurityGroupIds") or []:
        yield _Target(
            f"arn:{partition}:ec2:{region}:{account}:security-group/{group_id}",
            ResourceKind.SECURITY_GROUP,
            partial(_security_group_tags, ec2, group_id),
            partial(_create_tags, ec2, group_id),
        )
    for interface in _network_interfaces(ec2, description, cluster_id):
        eni = str(interface["NetworkInterfaceId"])
        yield _Target(
            f"arn:{partition}:ec2:{region}:{account}:network-interface/{eni}",
            ResourceKind.NETWORK_INTERFACE,
            partial(_as_dict, interface.get("TagSet")),
            partial(_create_tags, ec2, eni),
        )


def tag_cluster(
    cluster: Cluster, *, keys: CostTagKeys, clients: CostTagClients, store: StateStore
) -> TagReport:
    """Put the cluster's cost tags on it and on every taggable resource it uses; what changed.

    Raises ClientError when DescribeCluster fails (ResourceNotFound: the cluster is gone)."""
    desired = cost_tag_set(
        cluster.cluster_name,
        owner=cluster.owner,
        project=cluster.project,
        cost_center=cluster.cost_center,
        keys=keys,
    )
    description = clients.sagemaker.describe_cluster(ClusterName=cluster.cluster_name)
    tagger = _Tagger(cluster, desired, store, keys=keys)
    for target in _targets(cluster, description, clients):
        tagger.reconcile(target)
    return tagger.report


def _bucket_tags(s3: S3Client, bucket: str) -> dict[str, str]:
    try:
        return _as_dict(s3.get_bucket_tagging(Bucket=bucket)["TagSet"])
    except ClientError as exc:
        if _code(exc) == "NoSuchTagSet":
            return {}
        raise


def _put_bucket_tags(s3: S3Client, bucket: str, wanted: dict[str, str], current: dict[str, str]) -> None:
    """PutBucketTagging replaces the whole set: the bucket's other tags are written back with ours."""
    merged = {**current, **wanted}
    if len(merged) > S3_MAX_TAGS:
        raise TooManyTags(f"the bucket would carry {len(merged)} tags (S3 allows {S3_MAX_TAGS})")
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": _as_list(merged)})


def _file_system_tags(fsx: FSxClient, file_system_id: str) -> dict[str, str]:
    found = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    if not found:  # AWS answers FileSystemNotFound; moto an empty list
        raise ResourceMissing(file_system_id)
    return _as_dict(found[0].get("Tags"))


def _tag_file_system(fsx: FSxClient, arn: str, wanted: dict[str, str], _: dict[str, str]) -> None:
    fsx.tag_resource(ResourceARN=arn, Tags=_as_list(wanted))


def _security_group_tags(ec2: EC2Client, group_id: str) -> dict[str, str]:
    found = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    if not found:
        raise ResourceMissing(group_id)
    return _as_dict(found[0].get("Tags"))


def _create_tags(ec2: EC2Client, resource_id: str, wanted: dict[str, str], _: dict[str, str]) -> None:
    ec2.create_tags(Resources=[resource_id], Tags=_as_list(wanted))


def report_warnings(report: TagReport) -> list[str]:
    """The operation warnings of a tagging step: each resource that could not be tagged, and each left
    untagged because its tags name another owner, project or cost center."""
    return [f"cost tags not applied to {failure}" for failure in report.failures] + [
        f"cost tags not applied to {conflict} (tagged for another owner, project or cost center: "
        "left as it is)"
        for conflict in report.conflicts
    ]


# --- the drift sweep ---------------------------------------------------------------------------------


def sweep(
    now: datetime,
    *,
    keys: CostTagKeys,
    clients: CostTagClients,
    store: StateStore,
    repairs: TagRepairRecords,
) -> dict[str, int]:
    """Every ACTIVE cluster's tags checked and repaired (recorded, announced); how many clusters were
    checked, repaired, could not be (wholly) tagged, and named a resource tagged for another owner."""
    counts = {"checked": 0, "repaired": 0, "failed": 0, "conflicts": 0}
    for cluster in every_cluster(store):
        if cluster.status is not ClusterStatus.ACTIVE:
            continue
        counts["checked"] += 1
        try:
            report = tag_cluster(cluster, keys=keys, clients=clients, store=store)
        except ClientError as exc:
            counts["failed"] += 1
            logger.warning("cost tags not checked", cluster=cluster.cluster_name, error=_code(exc))
            continue
        if report.failures:
            counts["failed"] += 1
            logger.warning("cost tags not applied", cluster=cluster.cluster_name, failures=report.failures)
        if report.conflicts:
            counts["conflicts"] += 1
            logger.warning(
                "cost tags left to another owner", cluster=cluster.cluster_name, conflicts=report.conflicts
            )
        if report.changes:
            counts["repaired"] += 1
            _record_repair(report, now=now, clients=clients, repairs=repairs)
    return counts


def _record_repair(
    report: TagReport, *, now: datetime, clients: CostTagClients, repairs: TagRepairRecords
) -> None:
    changes = [change.model_dump(mode="json", by_alias=True) for change in report.changes]
    repairs.record(report.cluster_name, now, json.dumps(changes))
    detail = {"clusterName": report.cluster_name, "changes": changes}
    put_event(
        clients.events, COST_TAGS_REPAIRED, json.dumps(detail), resources=[c.resource for c in report.changes]
    )
    logger.warning("cost tags repaired", cluster=report.cluster_name, changes=changes)


# --- project budgets ---------------------------------------------------------------------------------


def _project_kept(clusters: Iterator[Cluster], project: str, *, besides: str) -> bool:
    """Whether another cluster of the project may still run. A cluster being deleted does not count:
    two last clusters deleted at once would each keep the budget for the other."""
    return any(
        c.project == project and c.status in KEEPS_PROJECT_BUDGET and c.cluster_name != besides
        for c in clusters
    )


def release_project_budget(
    cluster_name: str, *, account: str, store: StateStore, budgets: BudgetsClient
) -> str | None:
    """After a cluster is deleted: its project's budget, if no other live cluster of the project remains,
    is deleted. The budget's name when it was (or was already gone), None when it is kept or the cluster
    has no project."""
    cluster = store.get_cluster(cluster_name)
    if cluster is None or not cluster.project:
        return None
    if _project_kept(every_cluster(store), cluster.project, besides=cluster_name):
        return None
    name = project_budget_name_for(cluster.project)
    _delete_budget(budgets, account, name)
    return name


def _delete_budget(budgets: BudgetsClient, account: str, name: str) -> None:
    try:
        budgets.delete_budget(AccountId=account, BudgetName=name)
    except ClientError as exc:
        if _code(exc) != "NotFoundException":
            raise
        return
    logger.info("project budget removed", budget=name)
