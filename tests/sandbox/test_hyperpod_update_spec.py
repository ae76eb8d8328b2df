"""UpdateCluster replaces a group's specification, as on AWS (issue 19 item 3): the simulator used to merge
the old and new specs, so a resize that dropped members never showed the reset it causes on AWS."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from autopilot.logic.instance_group_spec import group_spec
from botocore.exceptions import ClientError

from sandbox.emulator.clock import SandboxClock

Request = Callable[..., dict[str, Any]]
CLUSTER = "ml-cluster"


def _workers(sagemaker: Any) -> dict[str, Any]:
    described = sagemaker.describe_cluster(ClusterName=CLUSTER)
    return next(g for g in described["InstanceGroups"] if g["InstanceGroupName"] == "worker-group-1")


def _flexible_cluster(sagemaker: Any, clock: SandboxClock, request: Request) -> dict[str, Any]:
    """An InService cluster whose worker group is flexible, labelled, tainted and pinned to an AMI."""
    create = request(CLUSTER)
    workers = create["InstanceGroups"][1]
    del workers["InstanceType"], workers["SlurmConfig"]
    workers["InstanceRequirements"] = {"InstanceTypes": ["ml.p5.48xlarge", "ml.p5e.48xlarge"]}
    workers["KubernetesConfig"] = {
        "Labels": {"team": "research"},
        "Taints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}],
    }
    workers["ImageId"] = "ami-0123456789abcdef0"
    sagemaker.create_cluster(**create)
    clock.advance(20 * 60)
    return _workers(sagemaker)


def test_a_group_becomes_what_update_cluster_sent(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    before = _flexible_cluster(hyperpod_sagemaker, hyperpod_clock, hyperpod_cluster_request)
    assert before["KubernetesConfig"]["CurrentLabels"] == {"team": "research"}
    bare = {k: before[k] for k in ("InstanceGroupName", "LifeCycleConfig", "ExecutionRole", "ThreadsPerCore")}

    hyperpod_sagemaker.update_cluster(
        ClusterName=CLUSTER,
        InstanceGroups=[{**bare, "InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}],
    )

    after = _workers(hyperpod_sagemaker)
    assert after["InstanceType"] == "ml.p5.48xlarge"
    for gone in ("KubernetesConfig", "InstanceRequirements", "CurrentImageId", "DesiredImageId"):
        assert gone not in after, gone


def test_a_group_without_instance_type_or_requirements_is_refused(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    before = _flexible_cluster(hyperpod_sagemaker, hyperpod_clock, hyperpod_cluster_request)
    no_type = {k: before[k] for k in ("InstanceGroupName", "LifeCycleConfig", "ExecutionRole")}

    with pytest.raises(ClientError) as error:
        hyperpod_sagemaker.update_cluster(
            ClusterName=CLUSTER, InstanceGroups=[{**no_type, "InstanceCount": 1}]
        )

    assert error.value.response["Error"]["Code"] == "ValidationException"
    assert "InstanceRequirements" in error.value.response["Error"]["Message"]


def test_autopilots_resize_keeps_the_group_as_it_was(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    before = _flexible_cluster(hyperpod_sagemaker, hyperpod_clock, hyperpod_cluster_request)

    hyperpod_sagemaker.update_cluster(ClusterName=CLUSTER, InstanceGroups=[group_spec(before, 1)])
    hyperpod_clock.advance(10 * 60)

    after = _workers(hyperpod_sagemaker)
    counts = ("CurrentCount", "TargetCount")
    assert {k: v for k, v in after.items() if k not in counts} == {
        k: v for k, v in before.items() if k not in counts
    }
    assert (after["CurrentCount"], after["TargetCount"]) == (1, 1)
