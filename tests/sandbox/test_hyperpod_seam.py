"""Guards on the one place the sandbox patches moto (sandbox/services/hyperpod/responses.py), and the HTTP
path.

If a moto upgrade moves what the seam relies on, these fail first, naming the assumption.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import responses as moto_responses
from moto.core.utils import camelcase_to_underscores
from moto.sagemaker import urls as sagemaker_urls
from moto.sagemaker.responses import SageMakerResponse

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HYPERPOD_OPERATIONS, TAG_OPERATIONS, HyperPodSimulator
from sandbox.services.hyperpod.responses import seam_installed, simulator_for

MINUTE = 60.0


def test_moto_routes_sagemaker_requests_through_sagemaker_response_dispatch() -> None:
    assert list(sagemaker_urls.url_paths.values()) == [SageMakerResponse.dispatch]


def test_moto_calls_the_method_named_after_the_action_with_parsed_params() -> None:
    source = inspect.getsource(moto_responses.BaseResponse.call_action)
    assert "camelcase_to_underscores(self._get_action())" in source
    assert "method_names_from_class(self.__class__)" in source
    assert "isinstance(response, ActionResult)" in source
    assert SageMakerResponse().automated_parameter_parsing is True
    assert "self.params = " in inspect.getsource(moto_responses.BaseResponse.parse_parameters)


def test_moto_lacks_what_the_simulator_adds_and_has_what_it_overrides() -> None:
    """If moto grows one of these, the seam still overrides it; this shows which ones moto has."""
    moto_has = {
        op
        for op in (*HYPERPOD_OPERATIONS, *TAG_OPERATIONS)
        if hasattr(SageMakerResponse, camelcase_to_underscores(op))
    }
    assert {"CreateCluster", "DescribeCluster", "AddTags"} <= moto_has
    assert "BatchReplaceClusterNodes" not in moto_has


def test_install_and_uninstall_restore_moto(hyperpod_aws_env: None) -> None:
    original = SageMakerResponse.__dict__["create_cluster"]
    simulator = HyperPodSimulator(SandboxClock(speed=0), region="us-west-2", seed=1)

    simulator.install()
    assert seam_installed()
    assert SageMakerResponse.__dict__["create_cluster"] is not original
    assert hasattr(SageMakerResponse, "batch_replace_cluster_nodes")
    assert simulator_for("123456789012", "us-west-2") is simulator
    simulator.uninstall()

    assert not seam_installed()
    assert SageMakerResponse.__dict__["create_cluster"] is original
    assert not hasattr(SageMakerResponse, "batch_replace_cluster_nodes")


def test_every_region_gets_a_simulator_of_its_own_on_first_use(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_cluster_request: Callable[..., dict[str, Any]],
) -> None:
    other_region = boto3.client("sagemaker", region_name="eu-west-1")
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())

    with pytest.raises(ClientError) as error:  # the us-east-1 cluster is not in eu-west-1
        other_region.describe_cluster(ClusterName="ml-cluster")
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"  # never moto's answer
    with pytest.raises(ClientError) as error:
        other_region.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=["i-0123456789abcdef0"])
    assert error.value.response["Error"]["Code"] == "ResourceNotFound"

    spawned = simulator_for("123456789012", "eu-west-1")
    assert spawned is not None
    assert spawned is not hyperpod_sim
    assert spawned.clock is hyperpod_sim.clock
    assert hyperpod_sim.for_region("eu-west-1") is spawned
    assert set(hyperpod_sim.every_region()) == {hyperpod_sim, spawned}


def test_uninstalling_the_last_simulator_drops_the_spawned_ones(hyperpod_aws_env: None) -> None:
    simulator = HyperPodSimulator(SandboxClock(speed=0), seed=3, duplicate_events=0.25)
    simulator.install()
    spawned = simulator.for_region("ap-south-1", account_id="210987654321")
    assert (spawned.account_id, spawned.region) == ("210987654321", "ap-south-1")
    assert (spawned.timings, spawned.duplicate_events) == (simulator.timings, 0.25)
    assert spawned.seed is not None
    assert spawned.seed != simulator.seed

    simulator.uninstall()

    assert not seam_installed()
    assert simulator_for("210987654321", "ap-south-1") is None


def test_tags_of_other_sagemaker_resources_stay_with_moto(hyperpod_sagemaker: Any) -> None:
    arn = hyperpod_sagemaker.create_model(
        ModelName="m",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
        PrimaryContainer={"Image": "img"},
    )["ModelArn"]

    hyperpod_sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}])

    assert hyperpod_sagemaker.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "k", "Value": "v"}]


def test_threaded_moto_server_serves_the_simulated_cluster(
    hyperpod_aws_env: None, moto_server: str, hyperpod_cluster_request: Callable[..., dict[str, Any]]
) -> None:
    clock = SandboxClock(speed=0)
    simulator = HyperPodSimulator(clock, seed=5)
    simulator.install()
    try:
        sagemaker = boto3.client("sagemaker", region_name="us-east-1", endpoint_url=moto_server)
        arn = sagemaker.create_cluster(**hyperpod_cluster_request("over-http"))["ClusterArn"]
        assert sagemaker.describe_cluster(ClusterName="over-http")["ClusterStatus"] == "Creating"

        clock.advance(20 * MINUTE)

        described = sagemaker.describe_cluster(ClusterName=arn)
        assert described["ClusterStatus"] == "InService"
        nodes = sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
        worker = next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "worker-group-1")
        replaced = sagemaker.batch_replace_cluster_nodes(ClusterName=arn, NodeIds=[worker])
        assert replaced["Successful"] == [worker]
        # the outgoing node is ShuttingDown and its successor Pending: neither is billed yet
        assert len(simulator.running_instances()) == 2
    finally:
        simulator.uninstall()


def test_mock_aws_and_simulator_in_process_share_state(
    hyperpod_aws_env: None, hyperpod_cluster_request: Callable[..., dict[str, Any]]
) -> None:
    with mock_aws():
        simulator = HyperPodSimulator(SandboxClock(speed=0), seed=2)
        simulator.install()
        try:
            boto3.client("sagemaker", region_name="us-east-1").create_cluster(**hyperpod_cluster_request())
            assert simulator.call("ListClusters", {})["ClusterSummaries"][0]["ClusterName"] == "ml-cluster"
        finally:
            simulator.uninstall()
