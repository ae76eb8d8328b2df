"""Server-side input validation from botocore's sagemaker model, worded as AWS words it.

A client with ``parameter_validation=False`` (or one built from an older model) can send what
botocore would reject; AWS then answers ``ValidationException`` with "N validation error(s)
detected: Value '...' at 'nodeIds' failed to satisfy constraint: ...". The simulator does the same.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from typing import Any

import botocore.session
from botocore.model import (
    ListShape,
    MapShape,
    OperationModel,
    ServiceModel,
    Shape,
    StringShape,
    StructureShape,
)


class HyperPodApiError(Exception):
    """An error the SageMaker API returns: ``code`` is the AWS error code (``ResourceNotFound``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def validation_error(message: str) -> HyperPodApiError:
    return HyperPodApiError("ValidationException", message)


@cache
def sagemaker_model() -> ServiceModel:
    session = botocore.session.get_session()
    return ServiceModel(session.get_service_data("sagemaker"), service_name="sagemaker")


def operation_model(operation: str) -> OperationModel:
    return sagemaker_model().operation_model(operation)


@cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:  # Java-only syntax such as \p{L}: AWS checks it, the sandbox cannot
        return None


def _render(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _check(shape: Shape, value: Any, path: str, errors: list[str]) -> None:
    def fail(constraint: str) -> None:
        errors.append(
            f"Value '{_render(value)}' at '{path}' failed to satisfy constraint: Member must {constraint}"
        )

    meta = shape.metadata
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            return
        for name in shape.required_members:
            if value.get(name) is None:
                errors.append(
                    f"Value 'null' at '{_join(path, _camel(name))}' failed to satisfy constraint: "
                    "Member must not be null"
                )
        for name, member in shape.members.items():
            if value.get(name) is not None:
                _check(member, value[name], _join(path, _camel(name)), errors)
    elif isinstance(shape, ListShape):
        if not isinstance(value, list):
            return
        if "min" in meta and len(value) < meta["min"]:
            fail(f"have length greater than or equal to {meta['min']}")
        if "max" in meta and len(value) > meta["max"]:
            fail(f"have length less than or equal to {meta['max']}")
        for index, item in enumerate(value, start=1):
            _check(shape.member, item, f"{path}.{index}.member", errors)
    elif isinstance(shape, MapShape):
        return
    elif isinstance(shape, StringShape) and isinstance(value, str):
        if "min" in meta and len(value) < meta["min"]:
            fail(f"have length greater than or equal to {meta['min']}")
        if "max" in meta and len(value) > meta["max"]:
            fail(f"have length less than or equal to {meta['max']}")
        if shape.enum and value not in shape.enum:
            fail(f"satisfy enum value set: [{', '.join(shape.enum)}]")
        pattern = meta.get("pattern")
        compiled = _compiled(pattern) if pattern else None
        if compiled is not None and compiled.fullmatch(value) is None:
            fail(f"satisfy regular expression pattern: {pattern}")
    elif shape.type_name in ("integer", "long") and isinstance(value, int):
        if "min" in meta and value < meta["min"]:
            fail(f"have value greater than or equal to {meta['min']}")
        if "max" in meta and value > meta["max"]:
            fail(f"have value less than or equal to {meta['max']}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def constraint_violations(shape: Shape, value: Any) -> list[str]:
    """Every way ``value`` breaks ``shape``'s constraints (lengths, ranges, enums, patterns, required)."""
    errors: list[str] = []
    _check(shape, value, "", errors)
    return errors


def validate_input(operation: str, params: dict[str, Any]) -> None:
    """Raise ``ValidationException`` the way AWS does when ``params`` break the model's constraints."""
    input_shape = operation_model(operation).input_shape
    if input_shape is None:
        return
    errors = constraint_violations(input_shape, params)
    if errors:
        count = len(errors)
        noun = "error" if count == 1 else "errors"
        raise validation_error(f"{count} validation {noun} detected: " + "; ".join(errors))
