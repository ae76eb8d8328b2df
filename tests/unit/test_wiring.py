"""One way to wire a function's dependencies (issue 22, Deliver 2): each function's handler module has a
typed, cached, argument-less ``deps()`` that builds them on the first invocation (ApiFunction's is
autopilot.api.wiring.deps, where its routers reach it), and nothing else in the module builds one at
import. So every test injects fakes the same way: ``monkeypatch.setattr(module, "deps", lambda: fake)``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(ROOT.glob("functions/*/app.py"))
API_WIRING = ROOT / "layers/autopilot/autopilot/api/wiring.py"
WIRINGS = [h for h in HANDLERS if h.parent.name != "api"] + [API_WIRING]


def _cached(function: ast.FunctionDef) -> bool:
    return any(
        ast.unparse(d).partition("(")[0] in {"cache", "lru_cache", "functools.cache"}
        for d in function.decorator_list
    )


@pytest.mark.parametrize("path", WIRINGS, ids=lambda p: p.parent.name if p.name == "app.py" else "api")
def test_a_function_wires_its_dependencies_in_one_typed_cached_deps(path: Path) -> None:
    tree = ast.parse(path.read_text())
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]

    [deps] = [f for f in functions if f.name == "deps"]
    assert [ast.unparse(d) for d in deps.decorator_list] == ["cache"]
    assert ast.unparse(deps.args) == ""  # no argument: one per execution environment
    assert deps.returns is not None
    # no second cached builder beside it (the five ways issue 22 found: guard(), waits(), dependencies()...)
    assert [f.name for f in functions if f is not deps and _cached(f)] == []


@pytest.mark.parametrize("path", HANDLERS, ids=lambda p: p.parent.name)
def test_no_handler_builds_a_dependency_at_import(path: Path) -> None:
    # An instance of the layer's classes at module level (the cost tagger's ``clients = CostTagClients()``)
    # is built at init, not on first use, and a test can only replace it attribute by attribute.
    tree = ast.parse(path.read_text())
    from_layer = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autopilot")
        for alias in node.names
    }
    built = [
        ast.unparse(node)
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.Expr)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func).partition(".")[0] in from_layer
        and ast.unparse(node.value.func) != "aws.use_config"  # the API's client config, before any client
    ]
    assert built == []
