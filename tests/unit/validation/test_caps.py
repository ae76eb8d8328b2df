"""The stack's cost guardrail (autopilot_config.validation.caps): MaxInstancesPerCluster,
AllowedInstanceTypes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from autopilot_config.validation import ClusterCaps, validate_config

from tests.unit.validation.builders import REGION, errors, messages_at, slurm_config, slurm_provisioning


def _huge() -> dict[str, Any]:
    """100 instance groups of 6,758 instances: every field within SageMaker's own limits."""
    config = slurm_config()
    worker = next(g for g in config["InstanceGroups"] if g["InstanceGroupName"] == "worker-group-1")
    config["InstanceGroups"] = [
        {**copy.deepcopy(worker), "InstanceGroupName": f"group-{i}", "InstanceCount": 6758}
        for i in range(100)
    ]
    return config


def test_sagemakers_own_limits_let_675800_instances_through() -> None:
    # issue 20: "100 groups x 6,758 instances validate" — without the stack's cap nothing refuses them
    report = validate_config(_huge(), region=REGION)

    assert messages_at(errors(report), "InstanceGroups") == []


def test_100_groups_of_6758_instances_are_refused_naming_the_field() -> None:
    report = validate_config(_huge(), region=REGION, caps=ClusterCaps())

    assert messages_at(errors(report), "InstanceGroups") == [
        "asks for 675800 instances in all; this Autopilot stack allows at most 2000 per cluster "
        "(MaxInstancesPerCluster)"
    ]


def test_a_cluster_at_the_cap_passes_and_one_more_instance_does_not() -> None:
    config = slurm_config()
    total = sum(g["InstanceCount"] for g in config["InstanceGroups"])

    at_cap = validate_config(config, slurm_provisioning(), region=REGION, caps=ClusterCaps(total))
    over = validate_config(config, slurm_provisioning(), region=REGION, caps=ClusterCaps(total - 1))

    assert at_cap.valid
    assert [path for _, path, _ in errors(over)] == ["InstanceGroups"]


def test_a_type_outside_the_allowed_ones_is_refused_naming_its_group() -> None:
    config = slurm_config()
    caps = ClusterCaps(allowed_types=("ml.t3.medium", "ml.g5.*"))
    config["InstanceGroups"][0]["InstanceType"] = "ml.t3.medium"
    config["InstanceGroups"][1]["InstanceType"] = "ml.g5.8xlarge"
    config["InstanceGroups"][2]["InstanceType"] = "ml.p5.48xlarge"

    report = validate_config(config, slurm_provisioning(), region=REGION, caps=caps)

    assert [(path, message) for _, path, message in errors(report)] == [
        (
            "InstanceGroups[2].InstanceType",
            "'ml.p5.48xlarge' is not one of this Autopilot stack's AllowedInstanceTypes "
            "(ml.t3.medium, ml.g5.*)",
        )
    ]


@pytest.mark.parametrize("instance_type", ["ml.p5.48xlarge", "ml.trn1.32xlarge"])
def test_no_allowed_types_allows_every_type(instance_type: str) -> None:
    assert ClusterCaps().allows(instance_type)
