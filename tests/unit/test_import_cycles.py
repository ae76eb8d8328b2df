"""No import cycle anywhere in the repository's code, and the layer package imports downward (``LAYERS``:
``autopilot.logic`` never imports ``autopilot.api``, ``dal`` never ``logic``...) (issue 22;
docs/architecture.md "Imports run downward, and never in a circle").

The graph is read from the sources with ``ast``, nothing imported: every ``import``/``from … import``
in a module is an edge, at module level or inside a function (a lazy import only hides a cycle until
the function runs), and so is ``importlib.import_module("a.literal.name")``. An import under
``if TYPE_CHECKING:`` is not an edge (it never runs). ``from package import name`` is an edge to the
submodule ``package.name`` when there is one, else to the package. Importing ``a.b.c`` also runs the
``__init__`` of ``a`` and ``a.b``; that is not counted as an edge (a package's ``__init__`` re-exporting
its own modules would otherwise be a cycle with each of them).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# (directory on sys.path, the code under it that is checked): as Lambda, pytest and mypy import it.
SOURCES = (
    ("layers/autopilot", "layers/autopilot/autopilot"),
    ("layers/autopilot", "layers/autopilot/autopilot_config"),
    ("cli/src", "cli/src/autopilot_cli"),
    ("agent", "agent/autopilot_agent"),
    (".", "functions"),
    (".", "sandbox"),
    (".", "tests"),
)


@dataclass(frozen=True)
class Module:
    name: str
    path: Path

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def find_modules(repo: Path, sources: tuple[tuple[str, str], ...]) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for root, code in sources:
        for path in sorted((repo / code).rglob("*.py")):
            parts = path.relative_to(repo / root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join(parts)
            modules[name] = Module(name, path)
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` that runs, at import or later: the body of ``if TYPE_CHECKING`` left out."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _statements(other)
            continue
        yield child
        yield from _statements(child)


def _imported_names(module: Module, tree: ast.Module) -> Iterator[str]:
    for node in _statements(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                yield f"{source}.{alias.name}"  # a submodule, or a name resolved to its module below
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Module → the repository's modules it imports (outside packages left out)."""
    graph: dict[str, set[str]] = {}
    for module in modules.values():
        targets: set[str] = set()
        for imported in _imported_names(module, ast.parse(module.path.read_text(), str(module.path))):
            name = imported
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module.name:
                targets.add(name)
        graph[module.name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative: a deep import chain must not hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(cycle: list[str], graph: dict[str, set[str]], modules: dict[str, Module]) -> str:
    lines = [f"{len(cycle)} modules import each other in a circle:"]
    for name in cycle:
        inside = sorted(graph[name] & set(cycle))
        lines.append(f"  {modules[name].path.relative_to(REPO)} imports {', '.join(inside)}")
    return "\n".join(lines)


Repository = tuple[dict[str, Module], dict[str, set[str]]]


@pytest.fixture(scope="module")
def repository() -> Repository:
    modules = find_modules(REPO, SOURCES)
    return modules, import_graph(modules)


def test_no_import_cycle_in_the_repository(repository: Repository) -> None:
    modules, graph = repository
    found = cycles(graph)
    assert not found, "\n".join(describe(cycle, graph, modules) for cycle in found)


def test_the_graph_covers_every_code_tree(repository: Repository) -> None:
    # A source root that moved would otherwise leave its code unchecked, and this test green.
    modules, graph = repository
    assert {"autopilot.logic", "autopilot_config.validation.engine", "autopilot_cli.main"} <= set(modules)
    assert "autopilot_agent.loop" in modules
    assert {"functions.api.app", "functions.agent.app"} <= set(modules)
    assert {"sandbox.emulator.seams", "sandbox.services.hyperpod", "sandbox.harness.stack"} <= set(modules)
    assert {"sandbox.apps.cli", "sandbox.__main__"} <= set(modules)
    assert "autopilot.api.routes" in graph["functions.api.app"]


def test_logic_imports_nothing_from_api(repository: Repository) -> None:
    # Use cases take and return models; the REST layer (routes, bodies, OpenAPI) sits above them.
    modules, graph = repository
    upward = sorted(
        f"{modules[name].path.relative_to(REPO)} imports {target}"
        for name, targets in graph.items()
        if name == "autopilot.logic" or name.startswith("autopilot.logic.")
        for target in targets
        if target == "autopilot.api" or target.startswith("autopilot.api.")
    )
    assert not upward, "\n".join(upward)


# The layer package's layers, lowest first: a module imports its own part or a lower layer, never a
# part beside it or above it. A new part of the package must be given its layer here.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "autopilot autopilot.clock autopilot.errors autopilot.aws autopilot.observability",
        "autopilot.models",
        "autopilot.settings",
        "autopilot.dal autopilot.emitted_events autopilot.diagnosis autopilot.caller_resources "
        "autopilot.idempotency autopilot.pricing",
        "autopilot.workflows",
        "autopilot.logic",
        "autopilot.api",
    )
)


def part_of(name: str) -> str:
    """``autopilot.logic.healing.decide`` -> ``autopilot.logic``; ``autopilot`` -> ``autopilot``."""
    return ".".join(name.split(".")[:2])


def test_the_layer_package_imports_downward(repository: Repository) -> None:
    modules, graph = repository
    rank = {part: index for index, layer in enumerate(LAYERS) for part in layer}
    parts = {part_of(name) for name in modules if name.split(".")[0] == "autopilot"}
    assert parts <= set(rank), f"give these a layer in LAYERS: {sorted(parts - set(rank))}"
    upward = sorted(
        f"{modules[name].path.relative_to(REPO)} imports {target} (layer {rank[part_of(target)]} >= "
        f"{rank[part_of(name)]})"
        for name, targets in graph.items()
        if name.split(".")[0] == "autopilot"
        for target in targets
        if target.split(".")[0] == "autopilot"
        and part_of(target) != part_of(name)
        and rank[part_of(target)] >= rank[part_of(name)]
    )
    assert not upward, "\n".join(upward)


# The sandbox's layers, lowest first (issue 22 Deliver 1; each package's docstring says what belongs in
# it): apps → harness → services → emulator → moto. The folder is the layer: ``sandbox.services.x.y`` is
# in ``services``. The package ``sandbox`` itself (its ``__init__``) is imported by everything, so it is
# the lowest; ``python -m sandbox`` (``__main__``) runs the CLI, an app.
SANDBOX_LAYERS: dict[str, frozenset[str]] = {
    "emulator": frozenset({"sandbox", "sandbox.emulator"}),  # moto made to behave as AWS
    "services": frozenset({"sandbox.services"}),  # simulators of the services moto lacks
    "harness": frozenset({"sandbox.harness"}),  # the Sandbox: all of the above started, stopped, reset
    "apps": frozenset({"sandbox.apps", "sandbox.__main__"}),  # the CLI, demo, bench, simulate, docgen
}
SANDBOX_TOP_LEVEL = frozenset({"__init__.py", "__main__.py", *(name for name in SANDBOX_LAYERS)})


def test_every_sandbox_module_lives_in_a_layer_package() -> None:
    # A module beside the layer packages would have no layer, and nothing to say what it may import.
    stray = sorted(
        path.name
        for path in (REPO / "sandbox").iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists()) and path.name not in SANDBOX_TOP_LEVEL
    )
    assert not stray, f"move these into one of sandbox/{{{','.join(SANDBOX_LAYERS)}}}/: {stray}"


def test_the_sandbox_imports_downward(repository: Repository) -> None:
    modules, graph = repository
    rank = {part: index for index, layer in enumerate(SANDBOX_LAYERS.values()) for part in layer}
    names = list(SANDBOX_LAYERS)
    parts = {part_of(name) for name in modules if name.split(".")[0] == "sandbox"}
    assert parts <= set(rank), f"give these a layer in SANDBOX_LAYERS: {sorted(parts - set(rank))}"
    upward = sorted(
        f"{modules[name].path.relative_to(REPO)} ({names[rank[part_of(name)]]}) imports {target} "
        f"({names[rank[part_of(target)]]})"
        for name, targets in graph.items()
        if name.split(".")[0] == "sandbox"
        for target in targets
        if target.split(".")[0] == "sandbox" and rank[part_of(target)] > rank[part_of(name)]
    )
    assert not upward, "\n".join(upward)


def allowed_targets(name: str) -> tuple[str, ...] | None:
    """The packages of the repository a module may import (the rest of it is never deployed or installed
    with it): the layer its own two packages, a handler the layer and its own folder, the shared rules
    (autopilot_config, the layer's and the CLI's) only themselves, the CLI itself and the shared rules.
    None: not restricted here."""
    top = name.split(".")
    if top[0] == "autopilot":
        return ("autopilot", "autopilot_config")
    if top[0] == "functions":
        return ("autopilot", "autopilot_config", f"functions.{top[1]}")
    if top[0] == "autopilot_config":
        return ("autopilot_config",)
    if top[0] == "autopilot_cli":
        return ("autopilot_cli", "autopilot_config")
    return None


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def test_each_deployed_or_installed_package_imports_only_what_ships_with_it(repository: Repository) -> None:
    modules, graph = repository
    wrong = sorted(
        f"{modules[name].path.relative_to(REPO)} imports {target}"
        for name, targets in graph.items()
        if (allowed := allowed_targets(name)) is not None
        for target in targets
        if not any(within(target, package) for package in allowed)
    )
    assert not wrong, "\n".join(wrong)


# The finder itself, on a small tree: each rule above is one that could let a cycle through.


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_cycle_through_a_lazy_import_and_a_relative_one_is_found(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "from .c import thing\n",
            "pkg/c.py": "def f():\n    from pkg.a import x\n",
            "pkg/d.py": "import pkg.a\n",
        },
    )
    modules = find_modules(tmp_path, ((".", "pkg"),))
    assert cycles(import_graph(modules)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_a_type_checking_import_is_no_edge_but_its_else_branch_and_import_module_are(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "import typing\n"
            "if typing.TYPE_CHECKING:\n    from pkg.b import B\nelse:\n    import pkg.c\n",
            "pkg/b.py": "from pkg import a\n",
            "pkg/c.py": "import importlib\nimportlib.import_module('pkg.sub.d')\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/d.py": "from ..a import A\n",
        },
    )
    modules = find_modules(tmp_path, ((".", "pkg"),))
    graph = import_graph(modules)
    assert graph["pkg.a"] == {"pkg.c"}
    assert graph["pkg.sub.d"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.c", "pkg.sub.d"]]
