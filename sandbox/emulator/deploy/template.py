"""Reading a template (YAML with CloudFormation's short-form tags) and its parameter values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .stack import TemplateError


class _TemplateLoader(yaml.SafeLoader):
    """SafeLoader that turns ``!Ref x`` into ``{"Ref": "x"}`` and ``!GetAtt a.b`` into Fn::GetAtt."""


def _construct_tag(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = tag_suffix if tag_suffix in ("Ref", "Condition") else f"Fn::{tag_suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if name == "Fn::GetAtt" and isinstance(value, str):
            logical_id, _, attribute = value.partition(".")
            value = [logical_id, attribute]
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_TemplateLoader.add_multi_constructor("!", _construct_tag)
# CloudFormation keeps timestamps and yes/no as strings; only true/false are booleans.
_TemplateLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_template(path: Path | str) -> dict[str, Any]:
    """Parse a SAM/CloudFormation template (YAML or JSON) into plain Python data."""
    text = Path(path).read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_TemplateLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(data, dict) or not isinstance(data.get("Resources"), dict):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources map)")
    return data


def parameter_values(
    template: Mapping[str, Any],
    overrides: Mapping[str, Any],
    *,
    max_values: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Every parameter's value, checked as CloudFormation checks it before it creates anything (with
    ``max_values`` in place of those parameters' MaxValue)."""
    definitions: dict[str, Any] = template.get("Parameters") or {}
    unknown = sorted(set(overrides) - set(definitions))
    if unknown:
        raise TemplateError(f"Parameters: unknown parameter override(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    for name, definition in definitions.items():
        if name in overrides:
            raw = overrides[name]
        elif "Default" in definition:
            raw = definition["Default"]
        else:
            raise TemplateError(f"Parameters.{name}: no value given and no Default")
        kind = str(definition.get("Type", "String"))
        if kind == "CommaDelimitedList" or kind.startswith("List<"):
            values[name] = raw if isinstance(raw, list) else [p.strip() for p in str(raw).split(",")]
            continue
        value = "true" if raw is True else "false" if raw is False else str(raw)
        lifted = {**definition, "MaxValue": max_values[name]} if max_values and name in max_values else None
        _check(name, lifted or definition, kind, value)
        values[name] = value
    return values


def _check(name: str, definition: Mapping[str, Any], kind: str, value: str) -> None:
    where = f"Parameters.{name}: {value!r}"
    if kind == "Number":
        try:
            number = float(value)
        except ValueError:
            raise TemplateError(f"{where} is not a Number") from None
        if "MinValue" in definition and number < float(definition["MinValue"]):
            raise TemplateError(f"{where} is less than MinValue {definition['MinValue']}")
        if "MaxValue" in definition and number > float(definition["MaxValue"]):
            raise TemplateError(f"{where} is greater than MaxValue {definition['MaxValue']}")
    if "MinLength" in definition and len(value) < int(definition["MinLength"]):
        raise TemplateError(f"{where} is shorter than MinLength {definition['MinLength']}")
    if "MaxLength" in definition and len(value) > int(definition["MaxLength"]):
        raise TemplateError(f"{where} is longer than MaxLength {definition['MaxLength']}")
    allowed = definition.get("AllowedValues")
    if allowed is not None and value not in [str(item) for item in allowed]:
        raise TemplateError(f"{where} is not one of {allowed}")
    pattern = definition.get("AllowedPattern")
    if pattern is not None and not re.fullmatch(pattern, value):
        raise TemplateError(f"{where} does not match {pattern}")
