"""An instance group re-specified for UpdateCluster carries every member botocore's model has (item 3 of
issue 19: a resize that dropped KubernetesConfig, InstanceRequirements, ImageId... reset the group)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import botocore.session
from autopilot.logic.budget_enforcement import scale_to_min_groups
from autopilot.logic.instance_group_spec import SPEC_SOURCES, group_spec
from botocore.model import Shape, StructureShape
from botocore.validate import ParamValidator

MODEL = botocore.session.get_session().get_service_model("sagemaker")
SPEC = cast(StructureShape, MODEL.shape_for("ClusterInstanceGroupSpecification"))
DETAILS = cast(StructureShape, MODEL.shape_for("ClusterInstanceGroupDetails"))
# Members a spec built from one group cannot hold together (botocore's documentation): InstanceType and
# InstanceRequirements exclude each other; a group names an image by ImageId or ImageReleaseVersion.
EXCLUSIVE = {"InstanceType", "ImageReleaseVersion"}


def example(shape: Shape, depth: int = 0) -> Any:
    """A value of ``shape`` with every member filled, as a DescribeCluster answer could hold it."""
    if isinstance(shape, StructureShape):
        members = list(shape.members.items())
        if shape.metadata.get("union"):
            members = members[:1]
        return {name: example(member, depth + 1) for name, member in members if depth < 8}
    kind = shape.type_name
    if kind == "list":
        return [example(shape.member, depth + 1)]  # type: ignore[attr-defined]
    if kind == "map":
        return {"key": example(shape.value, depth + 1)}  # type: ignore[attr-defined]
    if kind == "string":
        enum = shape.enum  # type: ignore[attr-defined]  # a StringShape's
        return enum[0] if enum else "x" * max(1, int(shape.metadata.get("min", 1)))
    if kind in ("integer", "long"):
        return int(shape.metadata.get("min", 1))
    if kind in ("float", "double"):
        return float(shape.metadata.get("min", 1))
    if kind == "boolean":
        return True
    if kind == "timestamp":
        return datetime(2026, 11, 1, tzinfo=UTC)
    raise AssertionError(f"no example for {kind}")


def valid_update(*specs: dict[str, Any]) -> None:
    shape = MODEL.operation_model("UpdateCluster").input_shape
    assert shape is not None
    report = ParamValidator().validate({"ClusterName": "c", "InstanceGroups": list(specs)}, shape)
    assert not report.has_errors(), report.generate_report()


def missing(value: Any, shape: Shape, path: str = "") -> list[str]:
    """Members of ``shape`` (at any depth) that ``value`` leaves out (a union holds one)."""
    if isinstance(shape, StructureShape) and isinstance(value, dict):
        union = shape.metadata.get("union")
        gone = [] if union else [f"{path}{name}" for name in shape.members if name not in value]
        for name, member in shape.members.items():
            if name in value:
                gone += missing(value[name], member, f"{path}{name}.")
        return gone
    if shape.type_name == "list" and isinstance(value, list) and value:
        return missing(value[0], shape.member, path)  # type: ignore[attr-defined]
    return []


def test_every_specification_member_has_a_source() -> None:
    # Fails when botocore adds a ClusterInstanceGroupSpecification member nobody mapped.
    assert set(SPEC_SOURCES) == set(SPEC.members)


def test_copied_members_have_the_same_shape_in_describe_cluster() -> None:
    def outline(shape: Shape) -> Any:
        if isinstance(shape, StructureShape):
            return {n: outline(m) for n, m in shape.members.items()}
        if shape.type_name == "list":
            return [outline(shape.member)]  # type: ignore[attr-defined]
        return shape.type_name

    for name, source in SPEC_SOURCES.items():
        if source == "copy":
            assert outline(SPEC.members[name]) == outline(DETAILS.members[name]), name


def test_a_fully_described_group_is_sent_back_whole_and_valid() -> None:
    described = example(DETAILS)

    spec = group_spec(described, 0)

    valid_update(spec)
    assert spec["InstanceCount"] == 0
    assert set(missing(spec, SPEC)) == EXCLUSIVE  # every other member, at every depth, is carried


def test_a_flexible_group_keeps_its_instance_types_labels_taints_and_image() -> None:
    described = {
        "InstanceGroupName": "workers",
        "InstanceRequirements": {
            "CurrentInstanceTypes": ["ml.p5.48xlarge"],
            "DesiredInstanceTypes": ["ml.p5.48xlarge", "ml.p5e.48xlarge"],
        },
        "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/", "OnCreate": "on_create.sh"},
        "KubernetesConfig": {
            "CurrentLabels": {"team": "a"},
            "DesiredLabels": {},
            "CurrentTaints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}],
        },
        "CurrentImageId": "ami-0123456789abcdef0",
        "CurrentImageReleaseVersion": "1.2.3",
        "NetworkInterface": {"InterfaceType": "efa"},
        "CurrentCount": 4,
        "TargetCount": 4,
        "MinCount": 1,
        "Status": "InService",
    }

    specs, _ = scale_to_min_groups({"InstanceGroups": [described]}, ["workers"])

    assert specs == [
        {
            "InstanceGroupName": "workers",
            "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
            "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lc/", "OnCreate": "on_create.sh"},
            "NetworkInterface": {"InterfaceType": "efa"},
            "InstanceCount": 1,
            "MinInstanceCount": 1,
            "InstanceRequirements": {"InstanceTypes": ["ml.p5.48xlarge", "ml.p5e.48xlarge"]},
            # the pending (empty) labels are what is declared; the taints as they are
            "KubernetesConfig": {
                "Labels": {},
                "Taints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}],
            },
            "ImageId": "ami-0123456789abcdef0",
        }
    ]
    valid_update(*specs)


def test_a_group_without_an_image_id_keeps_its_release_version() -> None:
    described = {
        "InstanceGroupName": "workers",
        "InstanceType": "ml.g5.xlarge",
        "ExecutionRole": "arn:aws:iam::123456789012:role/hp",
        "CurrentImageReleaseVersion": "1.2.3",
        "DesiredImageReleaseVersion": "1.2.4",
    }

    assert group_spec(described, 2)["ImageReleaseVersion"] == "1.2.4"
