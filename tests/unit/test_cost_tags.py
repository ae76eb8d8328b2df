"""Cost tags that stay true (autopilot.logic.cost_tags) on moto's S3 / FSx / EC2 / Budgets / DynamoDB
and the sandbox's HyperPod simulator: the cluster and what it uses tagged, the drift sweep, a project's
budget released with its last cluster; the tag set autopilot.models.cost_allocation builds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from autopilot.dal.cost_tags import TagRepairRecords
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.logic.cost_tags import (
    COST_TAGS_REPAIRED,
    CostTagClients,
    ResourceKind,
    release_project_budget,
    report_warnings,
    sweep,
    tag_cluster,
)
from autopilot.models.cost_allocation import (
    CostTagKeys,
    cost_tag_set,
    parse_cost_tag_keys,
    project_budget_name_for,
)
from autopilot.models.records import Cluster, ClusterStatus
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator
from tests.samples import create_body

REGION = "us-east-1"
ACCOUNT = "123456789012"
BUCKET = "sagemaker-lifecycle-123456789012"
TABLE = "state"
KEYS = CostTagKeys()


class CapturedEvents:
    """EventBridge's PutEvents, kept (the contract of the Cost Tags Repaired event)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, int]:
        self.entries += Entries
        return {"FailedEntryCount": 0}


@dataclass
class World:
    """The account: a VPC with a subnet and security group, the lifecycle bucket, one FSx file system."""

    clients: CostTagClients
    events: CapturedEvents
    store: InMemoryStateStore
    repairs: TagRepairRecords
    subnet: str
    group: str
    file_system: str

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)  # type: ignore[call-overload]

    def create(
        self, name: str = "ml-cluster", *, project: str = "llm", cost_center: str | None = "cc-42"
    ) -> Cluster:
        """A cluster in HyperPod and ACTIVE in the registry (created without cost tags: none yet)."""
        config = create_body(name)["clusterConfig"]
        config.pop("Tags")
        config["VpcConfig"] = {"SecurityGroupIds": [self.group], "Subnets": [self.subnet]}
        arn = self.client("sagemaker").create_cluster(**config)["ClusterArn"]
        cluster = Cluster(
            cluster_name=name,
            status=ClusterStatus.ACTIVE,
            created_at="2026-11-01T00:00:00Z",
            updated_at="2026-11-01T00:00:00Z",
            last_operation_id="op-1",
            owner="ann",
            project=project,
            cost_center=cost_center,
            cluster_arn=arn,
            file_system_ids=[self.file_system],
        )
        self.store.clusters[name] = cluster
        return cluster

    def tags(self, kind: ResourceKind, resource: str) -> dict[str, str]:
        if kind is ResourceKind.CLUSTER:
            found = self.client("sagemaker").list_tags(ResourceArn=resource)["Tags"]
        elif kind is ResourceKind.BUCKET:
            found = self.client("s3").get_bucket_tagging(Bucket=resource)["TagSet"]
        elif kind is ResourceKind.FILE_SYSTEM:
            [fs] = self.client("fsx").describe_file_systems(FileSystemIds=[resource])["FileSystems"]
            found = fs.get("Tags", [])
        else:
            found = self.client("ec2").describe_tags(Filters=[{"Name": "resource-id", "Values": [resource]}])[
                "Tags"
            ]
        return {t["Key"]: t["Value"] for t in found}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        hyperpod = HyperPodSimulator(SandboxClock(speed=0), region=REGION, account_id=ACCOUNT, seed=7)
        hyperpod.install()
        try:
            ec2 = boto3.client("ec2", region_name=REGION)
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
            group = ec2.create_security_group(GroupName="efa", Description="EFA", VpcId=vpc)["GroupId"]
            s3 = boto3.client("s3", region_name=REGION)
            s3.create_bucket(Bucket=BUCKET)
            s3.put_bucket_tagging(
                Bucket=BUCKET, Tagging={"TagSet": [{"Key": "team", "Value": "ml-platform"}]}
            )
            fsx = boto3.client("fsx", region_name=REGION)
            file_system = fsx.create_file_system(
                FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet]
            )["FileSystem"]["FileSystemId"]
            boto3.client("dynamodb", region_name=REGION).create_table(
                TableName=TABLE,
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            events = CapturedEvents()
            clients = CostTagClients(
                sagemaker=boto3.client("sagemaker", region_name=REGION),
                s3=s3,
                fsx=fsx,
                ec2=ec2,
                budgets=boto3.client("budgets", region_name=REGION),
                events=events,  # type: ignore[arg-type]
            )
            yield World(
                clients, events, InMemoryStateStore(), TagRepairRecords(TABLE), subnet, group, file_system
            )
        finally:
            hyperpod.uninstall()


WANTED = {"ClusterName": "ml-cluster", "owner": "ann", "project": "llm", "cost-center": "cc-42"}


def _eni(world: World, cluster: Cluster) -> str:
    """An ENI as HyperPod places one in the cluster's subnet (its description names the cluster id)."""
    assert cluster.cluster_arn
    cluster_id = cluster.cluster_arn.rsplit("/", 1)[1]
    return str(
        world.client("ec2").create_network_interface(
            SubnetId=world.subnet, Groups=[world.group], Description=f"HyperPod cluster {cluster_id}"
        )["NetworkInterface"]["NetworkInterfaceId"]
    )


# --- tagging --------------------------------------------------------------------------------------


def test_the_cluster_and_every_resource_it_uses_get_the_tag_set(world: World) -> None:
    cluster = world.create()
    eni = _eni(world, cluster)
    unrelated = world.client("ec2").create_network_interface(SubnetId=world.subnet, Groups=[world.group])[
        "NetworkInterface"
    ]["NetworkInterfaceId"]

    report = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    assert [c.kind for c in report.changes] == [
        ResourceKind.CLUSTER,
        ResourceKind.BUCKET,
        ResourceKind.FILE_SYSTEM,
        ResourceKind.SECURITY_GROUP,
        ResourceKind.NETWORK_INTERFACE,
    ]
    assert report.failures == report.missing == report.shared == []
    assert cluster.cluster_arn
    assert world.tags(ResourceKind.CLUSTER, cluster.cluster_arn) == WANTED
    # PutBucketTagging replaces the set: the bucket's own tag is written back with ours
    assert world.tags(ResourceKind.BUCKET, BUCKET) == {"team": "ml-platform", **WANTED}
    assert world.tags(ResourceKind.FILE_SYSTEM, world.file_system) == WANTED
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group) == WANTED
    assert world.tags(ResourceKind.NETWORK_INTERFACE, eni) == WANTED
    assert world.tags(ResourceKind.NETWORK_INTERFACE, unrelated) == {}  # another cluster's, or nobody's
    assert report.changes[1].resource == f"arn:aws:s3:::{BUCKET}"


def test_a_second_pass_changes_nothing(world: World) -> None:
    cluster = world.create()
    tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    again = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    assert again.changes == []


def test_configured_keys_and_a_cluster_without_cost_center(world: World) -> None:
    cluster = world.create(cost_center=None)
    keys = parse_cost_tag_keys("owner=Owner,project=Project")

    tag_cluster(cluster, keys=keys, clients=world.clients, store=world.store)

    assert world.tags(ResourceKind.SECURITY_GROUP, world.group) == {
        "ClusterName": "ml-cluster",
        "Owner": "ann",
        "Project": "llm",
    }


def test_a_resource_held_by_another_live_cluster_is_left_alone_and_taken_over_once_it_is_gone(
    world: World,
) -> None:
    first, second = world.create("first"), world.create("second")
    tag_cluster(first, keys=KEYS, clients=world.clients, store=world.store)

    shared = tag_cluster(second, keys=KEYS, clients=world.clients, store=world.store)

    assert set(shared.shared) == {
        f"arn:aws:s3:::{BUCKET}",
        f"arn:aws:fsx:{REGION}:{ACCOUNT}:file-system/{world.file_system}",
        f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/{world.group}",
    }
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group)["ClusterName"] == "first"
    assert [c.kind for c in shared.changes] == [ResourceKind.CLUSTER]  # its own ARN is always its own

    world.store.clusters["first"] = first.model_copy(update={"status": ClusterStatus.DELETED})
    taken = tag_cluster(second, keys=KEYS, clients=world.clients, store=world.store)

    assert taken.shared == []
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group)["ClusterName"] == "second"


def test_a_resource_tagged_for_another_owner_keeps_its_tags_and_is_a_warning(world: World) -> None:
    # A config may name another team's security group or bucket: tagging it owner=ann would move that
    # team's costs, and the drift sweep would keep them moved.
    cluster = world.create()
    world.client("ec2").create_tags(Resources=[world.group], Tags=[{"Key": "owner", "Value": "finance"}])
    world.client("s3").put_bucket_tagging(
        Bucket=BUCKET,
        Tagging={"TagSet": [{"Key": "project", "Value": "ledger"}, {"Key": "owner", "Value": "ann"}]},
    )

    report = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    group_arn = f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/{world.group}"
    assert report.conflicts == [f"arn:aws:s3:::{BUCKET}: project=ledger", f"{group_arn}: owner=finance"]
    # not even ClusterName: the group is not the cluster's to tag
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group) == {"owner": "finance"}
    assert world.tags(ResourceKind.BUCKET, BUCKET) == {"project": "ledger", "owner": "ann"}
    assert [c.kind for c in report.changes] == [ResourceKind.CLUSTER, ResourceKind.FILE_SYSTEM]
    assert report_warnings(report) == [
        f"cost tags not applied to arn:aws:s3:::{BUCKET}: project=ledger (tagged for another owner, project "
        "or cost center: left as it is)",
        f"cost tags not applied to {group_arn}: owner=finance (tagged for another owner, project or cost "
        "center: left as it is)",
    ]

    counts = sweep(NOW, keys=KEYS, clients=world.clients, store=world.store, repairs=world.repairs)

    assert counts == {"checked": 1, "repaired": 0, "failed": 0, "conflicts": 1}
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group) == {"owner": "finance"}
    assert world.events.entries == []


def test_a_resource_whose_cost_tags_agree_gets_the_ones_it_lacks(world: World) -> None:
    cluster = world.create()
    world.client("ec2").create_tags(Resources=[world.group], Tags=[{"Key": "owner", "Value": "ann"}])

    report = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    assert report.conflicts == []
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group) == WANTED


def test_resources_that_do_not_exist_are_reported_missing_not_failed(world: World) -> None:
    cluster = world.create().model_copy(update={"file_system_ids": ["fs-0123456789abcdef0"]})
    world.client("s3").delete_bucket_tagging(Bucket=BUCKET)
    world.client("s3").delete_bucket(Bucket=BUCKET)

    report = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    assert report.missing == [
        f"arn:aws:s3:::{BUCKET}",
        f"arn:aws:fsx:{REGION}:{ACCOUNT}:file-system/fs-0123456789abcdef0",
    ]
    assert report.failures == []
    assert report_warnings(report) == []


def test_a_bucket_that_cannot_take_the_tags_is_a_failure_and_a_warning(world: World) -> None:
    cluster = world.create()
    full = [{"Key": f"k{i}", "Value": "v"} for i in range(49)]
    world.client("s3").put_bucket_tagging(Bucket=BUCKET, Tagging={"TagSet": full})

    report = tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    assert report.failures == [f"arn:aws:s3:::{BUCKET}: the bucket would carry 53 tags (S3 allows 50)"]
    assert report_warnings(report) == [
        f"cost tags not applied to arn:aws:s3:::{BUCKET}: the bucket would carry 53 tags (S3 allows 50)"
    ]
    assert len(world.tags(ResourceKind.BUCKET, BUCKET)) == 49  # untouched


# --- the drift sweep ------------------------------------------------------------------------------


NOW = datetime(2026, 11, 2, 3, 0, tzinfo=UTC)


def test_the_sweep_puts_back_a_removed_and_a_changed_tag_and_records_what_it_changed(world: World) -> None:
    cluster = world.create()
    tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)
    assert cluster.cluster_arn
    world.client("sagemaker").delete_tags(ResourceArn=cluster.cluster_arn, TagKeys=["owner"])
    # the cluster's own ARN is Autopilot's: a tag changed there by hand is put back too
    world.client("sagemaker").add_tags(
        ResourceArn=cluster.cluster_arn, Tags=[{"Key": "project", "Value": "hand-made"}]
    )
    world.client("ec2").delete_tags(Resources=[world.group], Tags=[{"Key": "project"}])

    counts = sweep(NOW, keys=KEYS, clients=world.clients, store=world.store, repairs=world.repairs)

    assert counts == {"checked": 1, "repaired": 1, "failed": 0, "conflicts": 0}
    assert world.tags(ResourceKind.CLUSTER, cluster.cluster_arn)["owner"] == "ann"
    assert world.tags(ResourceKind.SECURITY_GROUP, world.group)["project"] == "llm"
    record = world.repairs.get("ml-cluster")
    assert record is not None
    assert record.repaired_at == NOW
    assert record.repairs == 1
    assert record.changes == [
        {
            "resource": cluster.cluster_arn,
            "kind": "cluster",
            "set": {"owner": "ann", "project": "llm"},
            "previous": {"project": "hand-made"},
        },
        {
            "resource": f"arn:aws:ec2:{REGION}:{ACCOUNT}:security-group/{world.group}",
            "kind": "security-group",
            "set": {"project": "llm"},
            "previous": {},
        },
    ]
    [event] = world.events.entries
    assert event["Source"] == "hyperpod.autopilot"
    assert event["DetailType"] == COST_TAGS_REPAIRED == "Cost Tags Repaired"
    assert json.loads(event["Detail"]) == {"clusterName": "ml-cluster", "changes": record.changes}


def test_a_sweep_with_nothing_to_repair_writes_nothing(world: World) -> None:
    cluster = world.create()
    tag_cluster(cluster, keys=KEYS, clients=world.clients, store=world.store)

    counts = sweep(NOW, keys=KEYS, clients=world.clients, store=world.store, repairs=world.repairs)

    assert counts == {"checked": 1, "repaired": 0, "failed": 0, "conflicts": 0}
    assert world.repairs.get("ml-cluster") is None
    assert world.events.entries == []


def test_the_sweep_checks_only_active_clusters_and_survives_one_that_is_gone(world: World) -> None:
    creating = world.create("creating")
    world.store.clusters["creating"] = creating.model_copy(update={"status": ClusterStatus.CREATING})
    gone = world.create("gone")
    world.client("sagemaker").delete_cluster(ClusterName="gone")
    world.store.clusters["zz-registered-only"] = gone.model_copy(
        update={"cluster_name": "zz-registered-only"}
    )
    world.create("ok")

    counts = sweep(NOW, keys=KEYS, clients=world.clients, store=world.store, repairs=world.repairs)

    # gone: HyperPod deletes it (still described while Deleting); registered-only: ResourceNotFound
    assert counts["checked"] == 3
    assert counts["failed"] == 1
    creating_arn = creating.cluster_arn
    assert creating_arn
    assert "ClusterName" not in world.tags(ResourceKind.CLUSTER, creating_arn)


# --- project budgets ------------------------------------------------------------------------------


def _project_budget(world: World, project: str) -> None:
    world.client("budgets").create_budget(
        AccountId=ACCOUNT,
        Budget={
            "BudgetName": project_budget_name_for(project),
            "BudgetLimit": {"Amount": "100", "Unit": "USD"},
            "TimeUnit": "MONTHLY",
            "BudgetType": "COST",
            "CostFilters": {"TagKeyValue": [f"user:project${project}"]},
        },
    )


def _budget_names(world: World) -> list[str]:
    return [
        b["BudgetName"]
        for b in world.client("budgets").describe_budgets(AccountId=ACCOUNT).get("Budgets", [])
    ]


@pytest.mark.parametrize(
    ("other", "removed"),
    [
        (ClusterStatus.ACTIVE, False),
        (ClusterStatus.CREATING, False),
        (ClusterStatus.DELETE_FAILED, False),
        # two last clusters deleted at once: neither keeps the budget for the other
        (ClusterStatus.DELETING, True),
        (ClusterStatus.DELETED, True),
        (ClusterStatus.CREATE_FAILED, True),
    ],
)
def test_the_project_budget_goes_with_the_projects_last_cluster(
    world: World, other: ClusterStatus, removed: bool
) -> None:
    _project_budget(world, "llm")
    first, second = world.create("first"), world.create("second")
    world.store.clusters["first"] = first.model_copy(update={"status": ClusterStatus.DELETING})
    world.store.clusters["second"] = second.model_copy(update={"status": other})
    world.create("elsewhere", project="vision")

    name = release_project_budget("first", account=ACCOUNT, store=world.store, budgets=world.clients.budgets)

    assert name == ("hyperpod-project.llm" if removed else None)
    assert ("hyperpod-project.llm" in _budget_names(world)) is not removed


def test_releasing_a_budget_that_is_gone_is_fine(world: World) -> None:
    world.create("only")

    assert (
        release_project_budget("only", account=ACCOUNT, store=world.store, budgets=world.clients.budgets)
        == "hyperpod-project.llm"
    )


# --- the tag set ----------------------------------------------------------------------------------


def test_the_tag_set_leaves_out_what_the_cluster_has_not() -> None:
    assert cost_tag_set("c", owner="ann", project=None, cost_center=None, keys=KEYS) == {
        "ClusterName": "c",
        "owner": "ann",
    }
