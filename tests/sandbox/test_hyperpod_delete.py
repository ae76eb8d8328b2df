"""DeleteCluster's ConflictException and a repeated delete (issue 19 item 12): the simulator used to answer
a second DeleteCluster with 200 and delete a cluster in the middle of an update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock

Request = Callable[..., dict[str, Any]]
MINUTE = 60.0


def _error(call: Callable[[], Any]) -> str:
    with pytest.raises(ClientError) as error:
        call()
    return str(error.value.response["Error"]["Code"])


@pytest.fixture
def in_service(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> dict[str, Any]:
    request = hyperpod_cluster_request()
    hyperpod_sagemaker.create_cluster(**request)
    hyperpod_clock.advance(20 * MINUTE)
    return request


def test_a_second_delete_is_a_conflict_and_a_gone_cluster_not_found(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, in_service: dict[str, Any]
) -> None:
    hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")

    assert _error(lambda: hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")) == "ConflictException"
    hyperpod_clock.advance(5 * MINUTE)
    assert _error(lambda: hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")) == "ResourceNotFound"


def test_a_cluster_being_updated_refuses_delete_until_it_is_in_service(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, in_service: dict[str, Any]
) -> None:
    workers = in_service["InstanceGroups"][1]
    hyperpod_sagemaker.update_cluster(
        ClusterName="ml-cluster", InstanceGroups=[{**workers, "InstanceCount": 3}]
    )

    assert _error(lambda: hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")) == "ConflictException"
    status = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")["ClusterStatus"]
    assert status == "Updating"  # the refused delete changed nothing
    hyperpod_clock.advance(12 * MINUTE)
    hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")
    assert hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] == "Deleting"


def test_a_cluster_still_creating_can_be_deleted(
    hyperpod_sagemaker: Any, hyperpod_cluster_request: Request
) -> None:
    # How a create is rolled back (create_cluster.asl.json's Roll Back Cluster).
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())

    hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")

    assert hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] == "Deleting"
