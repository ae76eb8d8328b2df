"""No module of the layer package (nor a function's handler) reaches into another module's private names.

A ``_name`` is its module's own business: when a second module needs it, it is shared vocabulary and
gets a public name in the one module that owns it (issue 22: DAL modules imported each other's
``_key_attributes``, ``_from_attributes``, ``_is_condition_failure``; they live in autopilot/dal/table.py
now). Read with ``ast``, nothing imported: ``from autopilot.x import _name`` and ``x._name`` on a module
bound by an import both count; dunders (``__version__``) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKED = (REPO / "layers/autopilot/autopilot", REPO / "functions")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reaches(source: str) -> list[str]:
    """Each ``module._name`` the source takes from another module of the ``autopilot`` package."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: set[str] = set()  # local names bound to an autopilot module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "autopilot":
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.module}.{alias.name} (line {node.lineno})")
                else:
                    # ``from autopilot.dal import state_table``: may name a module, whose _names are private
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "autopilot":
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules and base.id not in {"self", "cls"}:
                found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    offenders = {
        str(path.relative_to(REPO)): reaches
        for root in CHECKED
        for path in sorted(root.rglob("*.py"))
        if (reaches := private_reaches(path.read_text()))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from autopilot.dal.state_table import _key_attributes, cluster_key\n", 1),
        ("from autopilot.dal import state_table\nstate_table._cluster_item(c)\n", 1),
        ("import autopilot.dal.state_table\nautopilot.dal.state_table._serializer\n", 1),
        ("from autopilot import __version__\n", 0),
        ("from autopilot.dal.table import key_attributes\n", 0),
        ("from pydantic import _internal\n", 0),  # not the layer's
        ("from autopilot.models.records import Operation\nOperation._parse_leftovers\n", 1),
    ],
)
def test_the_check_sees_each_way_of_reaching_in(source: str, expected: int) -> None:
    assert len(private_reaches(source)) == expected
