"""The agent runs on the HyperPod Slurm AMI's python3 (3.8 on Ubuntu 20.04 images) with nothing installed:
its source parses as Python 3.8 and imports the standard library only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[2] / "agent" / "autopilot_agent"
SOURCES = sorted(AGENT.glob("*.py"))
# standard-library modules and attributes that came after 3.8
NEWER_MODULES = {"zoneinfo", "graphlib", "tomllib", "_tokenize"}
NEWER_NAMES = {
    "removeprefix",
    "removesuffix",
    "UTC",
    "cache",
    "pairwise",
    "bit_count",
    "randbytes",
    "TaskGroup",
}


def test_the_agent_has_modules() -> None:
    assert {path.name for path in SOURCES} >= {"__main__.py", "client.py", "loop.py", "slurm.py", "sigv4.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_the_source_is_python_38_with_the_standard_library_only(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 8))  # a match statement, (a := b) in [] ... fail

    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    assert imported - {"__future__"} <= set(sys.stdlib_module_names) - NEWER_MODULES
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} | {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
    }
    assert not names & NEWER_NAMES
    if path.name != "__init__.py":
        # list[str] / X | None in annotations are fine on 3.8 only when annotations are not evaluated
        first = next(node for node in tree.body if not isinstance(node, ast.Expr))
        assert isinstance(first, ast.ImportFrom)
        assert first.module == "__future__"
