"""Node operations of the HyperPod simulator: batch limits, partial success, reboot and replace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock

MINUTE = 60.0
UNKNOWN_NODE = "i-0123456789abcdef0"


@pytest.fixture
def cluster(
    hyperpod_sagemaker: Any,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Callable[..., dict[str, Any]],
) -> dict[str, list[str]]:
    """An InService cluster; returns its node ids by instance group."""
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=3))
    hyperpod_clock.advance(20 * MINUTE)
    return _nodes_by_group(hyperpod_sagemaker)


def _nodes_by_group(sagemaker: Any) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for node in sagemaker.list_cluster_nodes(ClusterName="ml-cluster", MaxResults=100)[
        "ClusterNodeSummaries"
    ]:
        groups.setdefault(node["InstanceGroupName"], []).append(node["InstanceId"])
    return groups


def _node_status(sagemaker: Any, node_id: str) -> str:
    details = sagemaker.describe_cluster_node(ClusterName="ml-cluster", NodeId=node_id)["NodeDetails"]
    return str(details["InstanceStatus"]["Status"])


@pytest.mark.parametrize("operation", ["batch_reboot_cluster_nodes", "batch_replace_cluster_nodes"])
def test_service_rejects_26_node_ids_with_a_validation_exception(
    hyperpod_sagemaker: Any, cluster: dict[str, list[str]], operation: str
) -> None:
    """botocore checks only minimums client-side: the 26-id call reaches the service, which refuses it."""
    worker = cluster["worker-group-1"][0]

    with pytest.raises(ClientError) as error:
        getattr(hyperpod_sagemaker, operation)(ClusterName="ml-cluster", NodeIds=[worker] * 26)

    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert error.value.response["Error"]["Message"].startswith(
        "1 validation error detected: Value '[" + worker + ", "
    )
    assert error.value.response["Error"]["Message"].endswith(
        "at 'nodeIds' failed to satisfy constraint: Member must have length less than or equal to 25"
    )
    assert _node_status(hyperpod_sagemaker, worker) == "Running"  # nothing was half-done


def test_reboot_partial_success_with_aws_error_codes(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, cluster: dict[str, list[str]]
) -> None:
    busy, fine = cluster["worker-group-1"][:2]
    hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[busy])

    result = hyperpod_sagemaker.batch_reboot_cluster_nodes(
        ClusterName="ml-cluster", NodeIds=[fine, busy, UNKNOWN_NODE]
    )

    assert result["Successful"] == [fine]
    assert {f["NodeId"]: f["ErrorCode"] for f in result["Failed"]} == {
        busy: "InstanceIdInUse",
        UNKNOWN_NODE: "InstanceIdNotFound",
    }
    assert _node_status(hyperpod_sagemaker, fine) == "Pending"
    hyperpod_clock.advance(5 * MINUTE)
    assert _node_status(hyperpod_sagemaker, fine) == "Running"


def test_reboot_of_a_pending_node_is_invalid_instance_status(
    hyperpod_sagemaker: Any, hyperpod_cluster_request: Callable[..., dict[str, Any]]
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=1))
    pending = _nodes_by_group(hyperpod_sagemaker)["worker-group-1"][0]

    result = hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[pending])

    assert "Successful" not in result
    assert result["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"


def test_replace_yields_a_new_instance_id(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, cluster: dict[str, list[str]]
) -> None:
    old = cluster["worker-group-1"][0]

    result = hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[old])

    assert result["Successful"] == [old]
    assert _node_status(hyperpod_sagemaker, old) == "ShuttingDown"
    again = hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[old])
    assert again["Failed"][0]["ErrorCode"] == "InstanceIdInUse"
    hyperpod_clock.advance(10 * MINUTE)
    workers = _nodes_by_group(hyperpod_sagemaker)["worker-group-1"]
    assert old not in workers
    (successor,) = set(workers) - set(cluster["worker-group-1"])
    assert _node_status(hyperpod_sagemaker, successor) == "Running"
    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.describe_cluster_node(ClusterName="ml-cluster", NodeId=old)
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"


def test_replace_refuses_the_slurm_controller(hyperpod_sagemaker: Any, cluster: dict[str, list[str]]) -> None:
    controller = cluster["controller-machine"][0]
    worker = cluster["worker-group-1"][0]

    result = hyperpod_sagemaker.batch_replace_cluster_nodes(
        ClusterName="ml-cluster", NodeIds=[controller, worker]
    )

    assert result["Successful"] == [worker]
    assert result["Failed"][0]["NodeId"] == controller
    assert result["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"
    assert "controller" in result["Failed"][0]["Message"]
    assert _node_status(hyperpod_sagemaker, controller) == "Running"


def test_controller_found_from_provisioning_parameters_in_s3(
    hyperpod_sagemaker: Any,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Callable[..., dict[str, Any]],
) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="sagemaker-lifecycle-bucket")
    s3.put_object(
        Bucket="sagemaker-lifecycle-bucket",
        Key="src/provisioning_parameters.json",
        Body=b'{"version": "1.0.0", "workload_manager": "slurm", "controller_group": "head"}',
    )
    request = hyperpod_cluster_request()
    head, workers = request["InstanceGroups"]
    for group in (head, workers):
        del group["SlurmConfig"]
    head["InstanceGroupName"] = "head"
    hyperpod_sagemaker.create_cluster(**request)
    hyperpod_clock.advance(20 * MINUTE)
    head_node = _nodes_by_group(hyperpod_sagemaker)["head"][0]

    result = hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[head_node])

    assert result["Failed"][0]["ErrorCode"] == "InvalidInstanceStatus"


def test_batch_delete_partial_success(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, cluster: dict[str, list[str]]
) -> None:
    doomed, rebooting = cluster["worker-group-1"][:2]
    hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[rebooting])

    result = hyperpod_sagemaker.batch_delete_cluster_nodes(
        ClusterName="ml-cluster", NodeIds=[doomed, rebooting, UNKNOWN_NODE, cluster["controller-machine"][0]]
    )

    assert result["Successful"] == [doomed]
    assert {f["NodeId"]: f["Code"] for f in result["Failed"]} == {
        rebooting: "NodeIdInUse",
        UNKNOWN_NODE: "NodeIdNotFound",
        cluster["controller-machine"][0]: "InvalidNodeStatus",
    }
    hyperpod_clock.advance(5 * MINUTE)
    workers = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")["InstanceGroups"][1]
    assert (workers["CurrentCount"], workers["TargetCount"]) == (2, 2)
    assert doomed not in _nodes_by_group(hyperpod_sagemaker)["worker-group-1"]


def test_unknown_cluster_is_resource_not_found(hyperpod_sagemaker: Any) -> None:
    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="nope", NodeIds=[UNKNOWN_NODE])

    assert error.value.response["Error"]["Code"] == "ResourceNotFound"
