"""The Resource Groups Tagging API sees the simulated HyperPod clusters
(sandbox/services/hyperpod/tagging.py).

The first tests pin what the seam relies on in moto; if an upgrade moves it, they fail first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from moto.core import resource_tagging
from moto.resourcegroupstaggingapi import models as tagging_models
from moto.resourcegroupstaggingapi.models import ResourceGroupsTaggingAPIBackend

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.hyperpod.tagging import SEAM, tagging_seam_installed

REGION = "us-east-1"
ACCOUNT = "123456789012"
MINUTE = 60.0


@pytest.fixture
def tagging(hyperpod_sim: HyperPodSimulator) -> Any:
    return boto3.client("resourcegroupstaggingapi", region_name=REGION)


@pytest.fixture
def cluster_arn(hyperpod_sagemaker: Any, hyperpod_cluster_request: Callable[..., dict[str, Any]]) -> str:
    """A cluster named demo, tagged ClusterName=demo (plus the request's owner and project)."""
    request = hyperpod_cluster_request("demo")
    request["Tags"] = [*request["Tags"], {"Key": "ClusterName", "Value": "demo"}]
    return str(hyperpod_sagemaker.create_cluster(**request)["ClusterArn"])


def tagged(tagging: Any, **filters: Any) -> dict[str, dict[str, str]]:
    """ARN -> tags of every resource GetResources returns (all pages)."""
    found: dict[str, dict[str, str]] = {}
    for page in tagging.get_paginator("get_resources").paginate(**filters):
        for item in page["ResourceTagMappingList"]:
            found[item["ResourceARN"]] = {t["Key"]: t["Value"] for t in item["Tags"]}
    return found


def by_cluster(name: str) -> dict[str, Any]:
    return {"TagFilters": [{"Key": "ClusterName", "Values": [name]}]}


# -- the seam ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "method",
    [
        "_get_resources_generator",
        "_get_tag_keys_generator",
        "_get_tag_values_generator",
        "_get_backend_for_resource",
    ],
)
def test_moto_tagging_backend_walks_the_module_level_name(method: str) -> None:
    code = getattr(ResourceGroupsTaggingAPIBackend, method).__code__
    assert SEAM in code.co_names, f"{method} no longer calls {SEAM}: the tagging seam has moved"


def test_moto_tagging_api_still_filters_tagged_resources_as_the_seam_expects() -> None:
    resource = resource_tagging.TaggedResource(arn="arn", tags={"k": "v"}, resource_type="sagemaker:cluster")
    assert resource.extra == {}
    assert resource_tagging.match_resource_type(resource.resource_type, ["sagemaker"])
    assert resource_tagging.match_resource_type(resource.resource_type, ["sagemaker:cluster"])
    assert not resource_tagging.match_resource_type(resource.resource_type, ["sagemaker:endpoint"])


def test_install_and_uninstall_restore_moto(hyperpod_aws_env: None) -> None:
    simulator = HyperPodSimulator(SandboxClock(speed=0), region="us-west-2", seed=1)

    simulator.install()
    assert tagging_seam_installed()
    assert getattr(tagging_models, SEAM) is not resource_tagging.iter_taggable_backends
    simulator.uninstall()

    assert not tagging_seam_installed()
    assert getattr(tagging_models, SEAM) is resource_tagging.iter_taggable_backends


# -- GetResources ----------------------------------------------------------------------------------
def test_get_resources_finds_the_cluster_by_its_tag(tagging: Any, cluster_arn: str) -> None:
    assert tagged(tagging, **by_cluster("demo")) == {
        cluster_arn: {"owner": "alice", "project": "llm", "ClusterName": "demo"}
    }
    assert cluster_arn.startswith(f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/")
    assert tagged(tagging, **by_cluster("other")) == {}


@pytest.mark.parametrize(
    ("resource_types", "found"),
    [(["sagemaker:cluster"], True), (["sagemaker"], True), (["sagemaker:endpoint"], False), (["ec2"], False)],
)
def test_resource_type_filters_apply(
    tagging: Any, cluster_arn: str, resource_types: list[str], found: bool
) -> None:
    result = tagged(tagging, ResourceTypeFilters=resource_types, **by_cluster("demo"))

    assert (cluster_arn in result) is found


def test_get_resources_shows_the_current_tags(
    tagging: Any, hyperpod_sagemaker: Any, cluster_arn: str
) -> None:
    hyperpod_sagemaker.add_tags(ResourceArn=cluster_arn, Tags=[{"Key": "team", "Value": "ml"}])
    hyperpod_sagemaker.delete_tags(ResourceArn=cluster_arn, TagKeys=["project"])

    assert tagged(tagging, **by_cluster("demo"))[cluster_arn] == {
        "owner": "alice",
        "ClusterName": "demo",
        "team": "ml",
    }
    assert tagged(tagging, TagFilters=[{"Key": "project"}]) == {}


def test_deleted_cluster_is_gone_once_deletion_finishes(
    tagging: Any, hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, cluster_arn: str
) -> None:
    hyperpod_clock.advance(20 * MINUTE)
    hyperpod_sagemaker.delete_cluster(ClusterName="demo")

    assert cluster_arn in tagged(tagging, **by_cluster("demo"))  # Deleting: still there
    hyperpod_clock.advance(5 * MINUTE)  # no SageMaker call in between: the tagging read moves time

    assert tagged(tagging, **by_cluster("demo")) == {}


def test_other_regions_do_not_see_the_cluster(cluster_arn: str) -> None:
    elsewhere = boto3.client("resourcegroupstaggingapi", region_name="eu-west-1")

    assert tagged(elsewhere, **by_cluster("demo")) == {}


def test_moto_resources_are_still_listed_alongside(tagging: Any, cluster_arn: str) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.create_queue(QueueName="leftover", tags={"ClusterName": "demo"})

    arns = set(tagged(tagging, **by_cluster("demo")))

    assert cluster_arn in arns
    assert f"arn:aws:sqs:{REGION}:{ACCOUNT}:leftover" in arns


# -- GetTagKeys / GetTagValues / TagResources / UntagResources ---------------------------------------
def test_tag_keys_and_values_include_the_cluster_tags(tagging: Any, cluster_arn: str) -> None:
    assert {"ClusterName", "owner", "project"} <= set(tagging.get_tag_keys()["TagKeys"])
    assert tagging.get_tag_values(Key="ClusterName")["TagValues"] == ["demo"]


def test_tag_and_untag_resources_reach_the_simulated_cluster(
    tagging: Any, hyperpod_sagemaker: Any, cluster_arn: str
) -> None:
    failed = tagging.tag_resources(ResourceARNList=[cluster_arn], Tags={"cost-center": "42"})
    assert failed["FailedResourcesMap"] == {}
    failed = tagging.untag_resources(ResourceARNList=[cluster_arn], TagKeys=["owner"])
    assert failed["FailedResourcesMap"] == {}

    tags = {t["Key"]: t["Value"] for t in hyperpod_sagemaker.list_tags(ResourceArn=cluster_arn)["Tags"]}
    assert tags == {"project": "llm", "ClusterName": "demo", "cost-center": "42"}
