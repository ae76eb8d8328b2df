"""Reading a template (YAML with CloudFormation's short-form tags) and its parameter values.

A template that declares AWS::LanguageExtensions (Fn::ForEach, Fn::FindInMap) is read expanded, as
CloudFormation runs that transform before any other: by aws-sam-cli's own implementation, in the SAM CLI's
environment (``language_extensions_sam.py``, run with .venv-sam's Python: aws-sam-cli pins a boto3 the
development environment cannot share). make lint's checkov reads the template so expanded: checkov does
not know the transform.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from .stack import TemplateError

LANGUAGE_EXTENSIONS: Final = "AWS::LanguageExtensions"
# .venv-sam's interpreter (make venv); AUTOPILOT_SAM_PYTHON names another one with aws-sam-cli >= 1.160
SAM_PYTHON_VARIABLE: Final = "AUTOPILOT_SAM_PYTHON"
_SAM_PYTHON: Final = Path(__file__).resolve().parents[3] / ".venv-sam" / "bin" / "python"
_EXPANDER: Final = Path(__file__).with_name("language_extensions_sam.py")


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
    if LANGUAGE_EXTENSIONS in transforms(data):
        return expand_language_extensions(data, where=str(path))
    return data


def transforms(template: Mapping[str, Any]) -> list[Any]:
    """The template's Transform as a list (a single name, a list of names, or none)."""
    declared = template.get("Transform")
    return list(declared) if isinstance(declared, list) else [declared] if declared else []


def expand_language_extensions(template: Mapping[str, Any], *, where: str = "template") -> dict[str, Any]:
    """``template`` with AWS::LanguageExtensions done by aws-sam-cli, and taken off its Transform.

    Done when the template is read, before parameter values are known: a Fn::ForEach collection must be
    a literal list (one from a parameter is refused rather than expanded with its default)."""
    declared = transforms(template)
    if declared[:1] != [LANGUAGE_EXTENSIONS]:
        raise TemplateError(f"{where}: Transform: {LANGUAGE_EXTENSIONS} must come first, got {declared}")
    for at, loop in _for_each_loops(template, where):
        collection = loop[1] if isinstance(loop, list) and len(loop) == 3 else None
        if not isinstance(collection, list) or not all(isinstance(item, str) for item in collection):
            raise TemplateError(
                f"{at}: the sandbox expands Fn::ForEach when it reads the template, before parameter"
                f" values are known; its collection must be a literal list of strings, got {collection!r}"
            )
    request = json.dumps({"template": template, "parameters": {}}, sort_keys=True)
    expanded: dict[str, Any] = json.loads(_expanded(request, where))
    left = [at for at, _loop in _for_each_loops(expanded, where)]
    if left:  # aws-sam-cli 1.170.0 leaves a Fn::ForEach inside a resource's Properties as written
        raise TemplateError(f"{', '.join(left)}: Fn::ForEach not expanded by aws-sam-cli")
    expanded["Transform"] = declared[1:]
    return expanded


def _for_each_loops(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and key.startswith("Fn::ForEach::"):
                yield f"{where}.{key}", item
            yield from _for_each_loops(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _for_each_loops(item, f"{where}[{index}]")


@functools.lru_cache(maxsize=8)
def _expanded(request: str, where: str) -> str:
    """aws-sam-cli's expansion of one template (cached: the tests read one template many times)."""
    python = Path(os.environ.get(SAM_PYTHON_VARIABLE) or _SAM_PYTHON)
    if not python.exists():
        raise TemplateError(
            f"{where}: Transform {LANGUAGE_EXTENSIONS} is expanded by aws-sam-cli's implementation, and"
            f" {python} (the SAM CLI's environment, make venv; or ${SAM_PYTHON_VARIABLE}) does not exist"
        )
    result = subprocess.run(
        [str(python), str(_EXPANDER)], input=request, capture_output=True, text=True, timeout=300, check=False
    )
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        raise TemplateError(f"{where}: {message[0]}")
    return result.stdout


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
