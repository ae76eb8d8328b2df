"""Valid configs from tests/fixtures/configs and small builders that break one thing at a time."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from autopilot_config.validation import ValidationReport

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
SLURM_CONFIG = FIXTURES / "slurm" / "cluster-config.json"
SLURM_PROVISIONING = FIXTURES / "slurm" / "provisioning_parameters.json"
EKS_CONFIG = FIXTURES / "eks" / "cluster-config.json"
INVALID_SYNTAX = FIXTURES / "invalid-syntax.json"

REGION = "us-west-2"
ACCOUNT = "123456789012"

_TOKEN = re.compile(r"([A-Za-z_]\w*)|\[(\d+)\]")


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def slurm_config() -> dict[str, Any]:
    return load(SLURM_CONFIG)


def slurm_provisioning() -> dict[str, Any]:
    return load(SLURM_PROVISIONING)


def eks_config() -> dict[str, Any]:
    return load(EKS_CONFIG)


def _walk(document: Any, path: str) -> tuple[Any, str | int]:
    tokens: list[str | int] = [name or int(index) for name, index in _TOKEN.findall(path)]
    parent = document
    for token in tokens[:-1]:
        parent = parent[token]
    return parent, tokens[-1]


def changed(document: dict[str, Any], *changes: tuple[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` with each ``(AWS-style path, value)`` set, e.g.
    ``changed(config, ("InstanceGroups[1].ThreadsPerCore", 3))``."""
    result = copy.deepcopy(document)
    for path, value in changes:
        parent, key = _walk(result, path)
        parent[key] = value
    return result


def without(document: dict[str, Any], *paths: str) -> dict[str, Any]:
    """A copy of ``document`` with the fields at ``paths`` removed."""
    result = copy.deepcopy(document)
    for path in paths:
        parent, key = _walk(result, path)
        del parent[key]
    return result


def errors(report: ValidationReport) -> list[tuple[str, str, str]]:
    return [(p.file, p.path, p.message) for p in report.errors]


def warnings(report: ValidationReport) -> list[tuple[str, str, str]]:
    return [(p.file, p.path, p.message) for p in report.warnings]


def unchecked(report: ValidationReport) -> list[tuple[str, str, str]]:
    return [(p.file, p.path, p.message) for p in report.unchecked]


def messages_at(problems: list[tuple[str, str, str]], path: str) -> list[str]:
    return [message for _, where, message in problems if where == path]
