"""Cluster lifecycles of the HyperPod simulator, seen through a plain boto3 SageMaker client."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.validate import ParamValidator

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator, HyperPodTimings
from sandbox.services.hyperpod.validation import (
    HyperPodApiError,
    constraint_violations,
    operation_model,
    validate_input,
)

MINUTE = 60.0
Request = Callable[..., dict[str, Any]]


def _create(sagemaker: Any, request: Request, name: str = "ml-cluster", **kwargs: Any) -> str:
    return str(sagemaker.create_cluster(**request(name, **kwargs))["ClusterArn"])


def _status(sagemaker: Any, name: str) -> str:
    return str(sagemaker.describe_cluster(ClusterName=name)["ClusterStatus"])


def test_create_cluster_goes_creating_then_in_service_after_twenty_minutes(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    arn = _create(hyperpod_sagemaker, hyperpod_cluster_request)

    assert re.fullmatch(r"arn:aws:sagemaker:us-east-1:123456789012:cluster/[a-z0-9]{12}", arn)
    described = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert described["ClusterStatus"] == "Creating"
    assert {g["Status"] for g in described["InstanceGroups"]} == {"Creating"}
    assert [g["CurrentCount"] for g in described["InstanceGroups"]] == [0, 0]
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Pending"}

    hyperpod_clock.advance(19 * MINUTE)
    assert _status(hyperpod_sagemaker, "ml-cluster") == "Creating"
    hyperpod_clock.advance(1 * MINUTE)

    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "InService"
    workers = described["InstanceGroups"][1]
    assert workers["InstanceGroupName"] == "worker-group-1"
    assert (workers["CurrentCount"], workers["TargetCount"], workers["Status"]) == (2, 2, "InService")
    assert workers["ThreadsPerCore"] == 1
    assert workers["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert workers["ExecutionRole"].endswith(":role/HyperPodExecutionRole")
    assert described["VpcConfig"]["Subnets"] == ["subnet-0123456789abcdef0"]
    assert described["NodeRecovery"] == "None"
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Running"}
    assert all(re.fullmatch(r"i-[0-9a-f]{17}", n["InstanceId"]) for n in nodes)


def test_timings_are_configurable_per_simulator(hyperpod_sim: HyperPodSimulator) -> None:
    fast = HyperPodSimulator(
        hyperpod_sim.clock, region="eu-west-1", timings=HyperPodTimings(create_cluster=30)
    )
    assert fast.timings.create_cluster == 30
    assert fast.timings.reboot_node == HyperPodTimings().reboot_node


def test_duplicate_cluster_name_is_resource_in_use(
    hyperpod_sagemaker: Any, hyperpod_cluster_request: Request
) -> None:
    _create(hyperpod_sagemaker, hyperpod_cluster_request)

    with pytest.raises(ClientError) as error:
        _create(hyperpod_sagemaker, hyperpod_cluster_request)

    assert error.value.response["Error"]["Code"] == "ResourceInUse"
    assert "already exists" in error.value.response["Error"]["Message"]


def test_delete_cluster_goes_deleting_then_gone(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    arn = _create(hyperpod_sagemaker, hyperpod_cluster_request)
    hyperpod_clock.advance(20 * MINUTE)

    assert hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")["ClusterArn"] == arn
    assert _status(hyperpod_sagemaker, "ml-cluster") == "Deleting"
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"ShuttingDown"}
    hyperpod_clock.advance(5 * MINUTE)

    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"
    assert hyperpod_sagemaker.list_clusters()["ClusterSummaries"] == []
    _create(hyperpod_sagemaker, hyperpod_cluster_request)  # the name is free again


def test_update_cluster_scales_up_and_down(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    request = hyperpod_cluster_request(workers=2)
    hyperpod_sagemaker.create_cluster(**request)
    hyperpod_clock.advance(20 * MINUTE)
    workers = request["InstanceGroups"][1]

    hyperpod_sagemaker.update_cluster(
        ClusterName="ml-cluster", InstanceGroups=[{**workers, "InstanceCount": 4}]
    )
    described = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert described["ClusterStatus"] == "Updating"
    assert (
        described["InstanceGroups"][1]["CurrentCount"],
        described["InstanceGroups"][1]["TargetCount"],
    ) == (2, 4)
    hyperpod_clock.advance(12 * MINUTE)
    described = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert described["ClusterStatus"] == "InService"
    assert described["InstanceGroups"][1]["CurrentCount"] == 4

    hyperpod_sagemaker.update_cluster(
        ClusterName="ml-cluster", InstanceGroups=[{**workers, "InstanceCount": 1}]
    )
    hyperpod_clock.advance(3 * MINUTE)
    nodes = hyperpod_sagemaker.list_cluster_nodes(
        ClusterName="ml-cluster", InstanceGroupNameContains="worker"
    )["ClusterNodeSummaries"]
    assert len(nodes) == 1
    assert _status(hyperpod_sagemaker, "ml-cluster") == "InService"


def test_update_cluster_while_creating_is_a_conflict(
    hyperpod_sagemaker: Any, hyperpod_cluster_request: Request
) -> None:
    request = hyperpod_cluster_request()
    hyperpod_sagemaker.create_cluster(**request)

    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.update_cluster(ClusterName="ml-cluster", InstanceGroups=request["InstanceGroups"])

    assert error.value.response["Error"]["Code"] == "ConflictException"


def test_update_cluster_software_goes_system_updating_then_in_service(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    _create(hyperpod_sagemaker, hyperpod_cluster_request)
    hyperpod_clock.advance(20 * MINUTE)

    hyperpod_sagemaker.update_cluster_software(ClusterName="ml-cluster")
    assert _status(hyperpod_sagemaker, "ml-cluster") == "SystemUpdating"
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"SystemUpdating"}
    hyperpod_clock.advance(15 * MINUTE)

    assert _status(hyperpod_sagemaker, "ml-cluster") == "InService"
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    assert all("LastSoftwareUpdateTime" in n for n in nodes)


def test_list_clusters_filters_sorts_and_paginates(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    for index in range(5):
        _create(hyperpod_sagemaker, hyperpod_cluster_request, f"team-a-{index}")
        hyperpod_clock.advance(1)
    _create(hyperpod_sagemaker, hyperpod_cluster_request, "other")

    page = hyperpod_sagemaker.list_clusters(NameContains="team-a", MaxResults=2, SortOrder="Descending")
    assert [c["ClusterName"] for c in page["ClusterSummaries"]] == ["team-a-4", "team-a-3"]
    paginator = hyperpod_sagemaker.get_paginator("list_clusters")
    names = [
        c["ClusterName"]
        for p in paginator.paginate(NameContains="team-a", PaginationConfig={"PageSize": 2})
        for c in p["ClusterSummaries"]
    ]
    assert names == [f"team-a-{i}" for i in range(5)]
    by_name = hyperpod_sagemaker.list_clusters(SortBy="NAME")["ClusterSummaries"]
    assert by_name[0]["ClusterName"] == "other"


def test_list_cluster_nodes_paginates_and_filters(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    _create(hyperpod_sagemaker, hyperpod_cluster_request, workers=12)
    hyperpod_clock.advance(20 * MINUTE)

    first = hyperpod_sagemaker.list_cluster_nodes(ClusterName="ml-cluster", MaxResults=5)
    assert len(first["ClusterNodeSummaries"]) == 5
    second = hyperpod_sagemaker.list_cluster_nodes(
        ClusterName="ml-cluster", MaxResults=5, NextToken=first["NextToken"]
    )
    assert not {n["InstanceId"] for n in first["ClusterNodeSummaries"]} & {
        n["InstanceId"] for n in second["ClusterNodeSummaries"]
    }
    paginator = hyperpod_sagemaker.get_paginator("list_cluster_nodes")
    every = [n for p in paginator.paginate(ClusterName="ml-cluster") for n in p["ClusterNodeSummaries"]]
    assert len(every) == 13
    controllers = hyperpod_sagemaker.list_cluster_nodes(
        ClusterName="ml-cluster", InstanceGroupNameContains="controller"
    )["ClusterNodeSummaries"]
    assert [n["InstanceGroupName"] for n in controllers] == ["controller-machine"]


def test_describe_cluster_node_gives_node_details(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    _create(hyperpod_sagemaker, hyperpod_cluster_request)
    hyperpod_clock.advance(20 * MINUTE)
    node_id = hyperpod_sagemaker.list_cluster_nodes(
        ClusterName="ml-cluster", InstanceGroupNameContains="worker"
    )["ClusterNodeSummaries"][0]["InstanceId"]

    details = hyperpod_sagemaker.describe_cluster_node(ClusterName="ml-cluster", NodeId=node_id)[
        "NodeDetails"
    ]

    assert details["InstanceId"] == node_id
    assert details["InstanceGroupName"] == "worker-group-1"
    assert details["InstanceType"] == "ml.p5.48xlarge"
    assert details["InstanceStatus"]["Status"] == "Running"
    assert re.fullmatch(r"ip-10-\d+-\d+-\d+\.ec2\.internal", details["PrivateDnsHostname"])
    assert details["LifeCycleConfig"]["SourceS3Uri"] == "s3://sagemaker-lifecycle-bucket/src"
    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.describe_cluster_node(ClusterName="ml-cluster", NodeId="i-0123456789abcdef0")
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"


def test_tags_on_the_cluster_arn(hyperpod_sagemaker: Any, hyperpod_cluster_request: Request) -> None:
    arn = _create(hyperpod_sagemaker, hyperpod_cluster_request)

    hyperpod_sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": "ClusterName", "Value": "ml-cluster"}])
    hyperpod_sagemaker.delete_tags(ResourceArn=arn, TagKeys=["project"])

    tags = {t["Key"]: t["Value"] for t in hyperpod_sagemaker.list_tags(ResourceArn=arn)["Tags"]}
    assert tags == {"owner": "alice", "ClusterName": "ml-cluster"}
    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(49)])
    assert error.value.response["Error"]["Code"] == "ValidationException"


def test_every_response_matches_the_botocore_output_shape(
    hyperpod_sim: HyperPodSimulator, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    """The simulator's raw answers, before moto serializes them, fit the model (no stray keys either)."""
    responses: dict[str, dict[str, Any]] = {}

    def call(operation: str, **params: Any) -> dict[str, Any]:
        responses[f"{operation}#{len(responses)}"] = result = hyperpod_sim.call(operation, params)
        return result

    request = hyperpod_cluster_request(NodeProvisioningMode="Continuous")  # it has cluster events
    request["InstanceGroups"][1]["OnStartDeepHealthChecks"] = ["InstanceStress", "InstanceConnectivity"]
    arn = call("CreateCluster", **request)["ClusterArn"]
    call("DescribeCluster", ClusterName=arn)
    checks = HyperPodTimings().deep_health_check
    hyperpod_clock.advance(20 * MINUTE + checks)  # created, and the deep health checks passed
    call("DescribeCluster", ClusterName=arn)
    call("ListClusters")
    nodes = call("ListClusterNodes", ClusterName=arn, MaxResults=1)["ClusterNodeSummaries"]
    call("DescribeClusterNode", ClusterName=arn, NodeId=nodes[0]["InstanceId"])
    workers = call("ListClusterNodes", ClusterName=arn, InstanceGroupNameContains="worker")[
        "ClusterNodeSummaries"
    ]
    call(
        "BatchRebootClusterNodes", ClusterName=arn, NodeIds=[workers[0]["InstanceId"], "i-0123456789abcdef0"]
    )
    call("BatchReplaceClusterNodes", ClusterName=arn, NodeIds=[workers[1]["InstanceId"]])
    call("BatchDeleteClusterNodes", ClusterName=arn, NodeIds=["i-0123456789abcdef0"])
    events = call("ListClusterEvents", ClusterName=arn)["Events"]
    call("DescribeClusterEvent", ClusterName=arn, EventId=events[0]["EventId"])
    call("AddTags", ResourceArn=arn, Tags=[{"Key": "a", "Value": "b"}])
    call("ListTags", ResourceArn=arn)
    call("DeleteTags", ResourceArn=arn, TagKeys=["a"])
    hyperpod_clock.advance(10 * MINUTE + checks)  # the replacement is up and checked
    call("UpdateClusterSoftware", ClusterName=arn)
    hyperpod_clock.advance(15 * MINUTE)
    call("UpdateCluster", ClusterName=arn, InstanceGroups=hyperpod_cluster_request()["InstanceGroups"])
    hyperpod_clock.advance(1 * MINUTE)  # an Updating cluster refuses DeleteCluster
    call("DeleteCluster", ClusterName=arn)

    validator = ParamValidator()
    for key, response in responses.items():
        operation = key.split("#")[0]
        output_shape = operation_model(operation).output_shape
        assert output_shape is not None
        report = validator.validate(response, output_shape)
        assert not report.has_errors(), f"{operation}: {report.generate_report()}"
        # the checker the simulator applies to its input: lengths, ranges, enums, patterns
        errors = constraint_violations(output_shape, response)
        assert errors == [], f"{operation}: {errors}"


def test_server_side_validation_uses_the_aws_wording() -> None:
    with pytest.raises(HyperPodApiError) as error:
        validate_input("ListClusters", {"MaxResults": 101, "SortBy": "SIZE"})

    assert error.value.code == "ValidationException"
    assert error.value.message.startswith("2 validation errors detected: ")
    assert (
        "at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to 100"
        in (error.value.message)
    )
    assert (
        "at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set" in error.value.message
    )
