"""The CreateCluster models must say what botocore's sagemaker model says, member by member.

When botocore is upgraded and a shape changes (a new field, a new enum value, a wider range),
this test names each difference so the models can be brought up to date deliberately.
"""

from __future__ import annotations

import re
import types
from datetime import datetime
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import botocore
import pytest
from autopilot_config.models.cluster_config import INSTANCE_TYPE_PATTERN, CreateClusterRequest
from autopilot_config.models.constraints import IntRange, Text
from autopilot_config.models.instance_types import BOTOCORE_VERSION, CLUSTER_INSTANCE_TYPES
from botocore.loaders import Loader
from pydantic import BaseModel

Spec = dict[str, Any]


@pytest.fixture(scope="module")
def shapes() -> dict[str, Any]:
    model: dict[str, Any] = Loader().load_service_model("sagemaker", "service-2", "2017-07-24")
    return model["shapes"]  # type: ignore[no-any-return]


def botocore_spec(shapes: dict[str, Any], name: str) -> Spec:
    shape = shapes[name]
    kind = shape["type"]
    if name == "ClusterInstanceType":
        return {"type": "instance type"}  # modelled as a pattern plus a known list; see below
    if kind == "string" and "enum" in shape:
        return {"type": "enum", "values": sorted(shape["enum"])}
    if kind == "string":
        return {
            "type": "string",
            "min": shape.get("min", 0),
            "max": shape.get("max"),
            "pattern": shape.get("pattern"),
        }
    if kind in ("integer", "long"):
        return {"type": "integer", "min": shape.get("min"), "max": shape.get("max")}
    if kind == "list":
        member = botocore_spec(shapes, shape["member"]["shape"])
        return {"type": "list", "min": shape.get("min", 0), "max": shape.get("max"), "member": member}
    if kind == "map":
        return {
            "type": "map",
            "min": shape.get("min", 0),
            "max": shape.get("max"),
            "key": botocore_spec(shapes, shape["key"]["shape"]),
            "value": botocore_spec(shapes, shape["value"]["shape"]),
        }
    if kind == "structure":
        return {"type": "structure", "shape": name}
    return {"type": kind}


def _lengths(metadata: list[Any]) -> tuple[int, int | None]:
    low, high = 0, None
    for item in metadata:
        if isinstance(item, annotated_types.Len):
            low, high = item.min_length, item.max_length
        elif isinstance(item, annotated_types.MinLen):
            low = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            high = item.max_length
    return low, high


def model_spec(annotation: Any, metadata: list[Any]) -> Spec:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        return model_spec(base, [*metadata, *extra])
    if origin in (Union, types.UnionType):
        (inner,) = [arg for arg in get_args(annotation) if arg is not type(None)]
        return model_spec(inner, metadata)
    if origin is Literal:
        return {"type": "enum", "values": sorted(get_args(annotation))}
    if origin is list:
        low, high = _lengths(metadata)
        return {"type": "list", "min": low, "max": high, "member": model_spec(get_args(annotation)[0], [])}
    if origin is dict:
        low, high = _lengths(metadata)
        key, value = get_args(annotation)
        return {
            "type": "map",
            "min": low,
            "max": high,
            "key": model_spec(key, []),
            "value": model_spec(value, []),
        }
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"type": "structure", "model": annotation}
    if annotation is str:
        (text,) = [item for item in metadata if isinstance(item, Text)] or [Text()]
        if text.pattern == INSTANCE_TYPE_PATTERN:
            return {"type": "instance type"}
        return {"type": "string", "min": text.min_length, "max": text.max_length, "pattern": text.pattern}
    if annotation is int:
        (bounds,) = [item for item in metadata if isinstance(item, IntRange)] or [IntRange()]
        return {"type": "integer", "min": bounds.min, "max": bounds.max}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is datetime:
        return {"type": "timestamp"}
    raise AssertionError(f"unexpected annotation {annotation!r}")


def _compare(
    spec: Spec, expected: Spec, shapes: dict[str, Any], where: str, found: list[str], unions: set[str]
) -> None:
    """Compare a model spec with a botocore spec, recursing into structures, lists and maps."""
    if spec["type"] == "structure" and expected["type"] == "structure":
        compare_structure(spec["model"], expected["shape"], shapes, where, found, unions)
        return
    nested = {"member", "key", "value"}
    flat = {k: v for k, v in spec.items() if k not in nested}
    flat_expected = {k: v for k, v in expected.items() if k not in nested}
    if flat != flat_expected:
        found.append(f"{where}: model {flat} != botocore {flat_expected}")
        return
    for key in sorted(nested & spec.keys()):
        _compare(spec[key], expected[key], shapes, f"{where}.<{key}>", found, unions)


def compare_structure(
    model: type[BaseModel],
    shape_name: str,
    shapes: dict[str, Any],
    where: str,
    found: list[str],
    unions: set[str],
) -> None:
    shape = shapes[shape_name]
    if shape.get("union"):
        unions.add(shape_name)
    members = shape.get("members", {})
    fields = model.model_fields
    for missing in sorted(members.keys() - fields.keys()):
        found.append(f"{where}.{missing}: in botocore's {shape_name} but not in {model.__name__}")
    for extra in sorted(fields.keys() - members.keys()):
        found.append(f"{where}.{extra}: in {model.__name__} but not in botocore's {shape_name}")
    required = set(shape.get("required", []))
    for name in sorted(members.keys() & fields.keys()):
        info = fields[name]
        if info.is_required() != (name in required):
            found.append(
                f"{where}.{name}: required is {info.is_required()}, botocore says {name in required}"
            )
        spec = model_spec(info.annotation, list(info.metadata))
        _compare(
            spec, botocore_spec(shapes, members[name]["shape"]), shapes, f"{where}.{name}", found, unions
        )


def test_the_create_cluster_models_match_botocore_member_by_member(shapes: dict[str, Any]) -> None:
    found: list[str] = []
    unions: set[str] = set()
    compare_structure(
        CreateClusterRequest, "CreateClusterRequest", shapes, "CreateClusterRequest", found, unions
    )
    assert found == []
    # Unions need an exactly-one validator; a new union shape in botocore needs one too.
    assert unions == {"ClusterInstanceStorageConfig"}


def test_the_known_instance_types_are_botocores(shapes: dict[str, Any]) -> None:
    assert set(shapes["ClusterInstanceType"]["enum"]) == CLUSTER_INSTANCE_TYPES, (
        f"instance_types.py lists botocore {BOTOCORE_VERSION}'s types; "
        f"regenerate it for {botocore.__version__}"
    )
    assert all(re.fullmatch(INSTANCE_TYPE_PATTERN, value) for value in CLUSTER_INSTANCE_TYPES)


def _with(shapes: dict[str, Any], name: str, **changes: Any) -> dict[str, Any]:
    return {**shapes, name: {**shapes[name], **changes}}


@pytest.mark.parametrize(
    ("mutate", "reported"),
    [
        (lambda s: _with(s, "ClusterThreadsPerCore", max=4), "InstanceGroups.<member>.ThreadsPerCore: model"),
        (lambda s: _with(s, "ClusterName", pattern="[a-z]+"), "CreateClusterRequest.ClusterName: model"),
        (lambda s: _with(s, "TagList", max=200), "CreateClusterRequest.Tags: model"),
        (
            lambda s: _with(s, "ClusterNodeRecovery", enum=["Automatic", "None", "Manual"]),
            "CreateClusterRequest.NodeRecovery: model",
        ),
        (
            lambda s: _with(
                s, "VpcConfig", members={**s["VpcConfig"]["members"], "Ipv6": {"shape": "Boolean"}}
            ),
            "VpcConfig.Ipv6: in botocore's VpcConfig but not in VpcConfig",
        ),
        (
            lambda s: _with(s, "ClusterLifeCycleConfig", required=["SourceS3Uri"]),
            "LifeCycleConfig.SourceS3Uri: required is False, botocore says True",
        ),
    ],
)
def test_the_drift_check_notices_a_difference(shapes: dict[str, Any], mutate: Any, reported: str) -> None:
    """The comparison itself must be able to fail: each kind of botocore change is named."""
    found: list[str] = []
    compare_structure(
        CreateClusterRequest, "CreateClusterRequest", mutate(shapes), "CreateClusterRequest", found, set()
    )
    assert found
    assert all(reported in line for line in found), found
