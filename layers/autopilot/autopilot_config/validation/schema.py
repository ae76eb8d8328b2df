"""Turning JSON text and pydantic errors into problems a user can act on."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from autopilot_config.validation.report import Problem

# Fields whose members are user-chosen keys, not field names: rendered as Labels["key"].
_MAP_FIELDS = frozenset({"Labels"})

_TYPE_MESSAGES = {
    "missing": "is required",
    "extra_forbidden": "unknown field (AWS rejects it)",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "datetime_type": "must be a date and time (ISO 8601) or epoch seconds",
    "datetime_parsing": "must be a date and time (ISO 8601) or epoch seconds",
    "datetime_from_date_parsing": "must be a date and time (ISO 8601) or epoch seconds",
}


def format_path(loc: Sequence[int | str]) -> str:
    """``('InstanceGroups', 1, 'ThreadsPerCore')`` -> ``InstanceGroups[1].ThreadsPerCore``."""
    path = ""
    previous: int | str | None = None
    for segment in loc:
        if segment == "[key]":
            # pydantic's marker for "the key itself is wrong"; the entry's path already names it.
            continue
        if isinstance(segment, int):
            path += f"[{segment}]"
        elif previous in _MAP_FIELDS:
            path += f"[{json.dumps(segment)}]"
        else:
            path += f".{segment}" if path else segment
        previous = segment
    return path


def describe_error(error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    if kind in ("too_short", "too_long"):
        noun = "entries" if ctx.get("field_type") == "Dictionary" else "items"
        if kind == "too_short":
            return f"must have at least {ctx['min_length']} {noun[:-1] if ctx['min_length'] == 1 else noun}"
        return f"must have at most {ctx['max_length']} {noun} (has {ctx['actual_length']})"
    if kind == "literal_error":
        return f"must be {ctx['expected']}"
    # Our own constrained types (models/constraints.py) already speak in user terms.
    return error["msg"]


Model = TypeVar("Model", bound=BaseModel)


def parse_document(
    model: type[Model], document: Mapping[str, Any], file: str
) -> tuple[Model | None, list[Problem]]:
    """``document`` as ``model``, or None and every problem pydantic finds in it, in document order."""
    try:
        return model.model_validate(document), []
    except ValidationError as exc:
        return None, [
            Problem(file=file, path=format_path(error["loc"]), message=describe_error(error))
            for error in exc.errors(include_url=False)
        ]


# A document that opens as YAML does (`---`, a comment, `Key:`): say so, not "Expecting value".
_YAML_START = re.compile(r"\s*(---|#|[A-Za-z_][\w.-]*\s*:(\s|$))")
YAML_NOT_JSON = (
    "is YAML, not JSON: the file is read as JSON, as `aws sagemaker create-cluster --cli-input-json` "
    "reads it (convert it, e.g. `yq -o=json . FILE`)"
)


def load_document(text: str, file: str) -> dict[str, Any] | Problem:
    """Parse a JSON document; a syntax error becomes a problem that names the line and column."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.lineno == 1 and _YAML_START.match(text.lstrip("\ufeff")):
            return Problem(file=file, path="", message=YAML_NOT_JSON)
        return Problem(file=file, path=f"line {exc.lineno}, column {exc.colno}", message=exc.msg)
    if not isinstance(document, dict):
        return Problem(file=file, path="", message=f"must be a JSON object, not {_json_kind(document)}")
    return document


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
