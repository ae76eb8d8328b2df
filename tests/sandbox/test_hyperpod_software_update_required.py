"""An older cluster refuses BatchReplaceClusterNodes until UpdateClusterSoftware has run on it (botocore's
documentation of the operation; the error's code and wording are the sandbox's, docs/sandbox.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator

MINUTE = 60.0


def test_replace_is_refused_until_the_cluster_is_patched(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Callable[..., dict[str, Any]],
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())
    hyperpod_clock.advance(20 * MINUTE)
    nodes = hyperpod_sagemaker.list_cluster_nodes(
        ClusterName="ml-cluster", InstanceGroupNameContains="worker"
    )["ClusterNodeSummaries"]
    node = nodes[0]["InstanceId"]
    hyperpod_sim.apply_fault("software_update_required", {"cluster": "ml-cluster"})

    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[node])

    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert "UpdateClusterSoftware" in error.value.response["Error"]["Message"]
    # a reboot is not concerned
    assert hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[node])[
        "Successful"
    ] == [node]
    hyperpod_clock.advance(10 * MINUTE)
    hyperpod_sagemaker.update_cluster_software(ClusterName="ml-cluster")
    hyperpod_clock.advance(15 * MINUTE)
    replaced = hyperpod_sagemaker.batch_replace_cluster_nodes(ClusterName="ml-cluster", NodeIds=[node])
    assert replaced["Successful"] == [node]
