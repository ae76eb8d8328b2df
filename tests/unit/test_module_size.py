"""No module over 600 lines, the sandbox's, the product's or the tests' (issue 22, "A house the next
engineer can live in"; docs/architecture.md).

A module that grows past it is split by job, as the HyperPod simulator, Budgets, SSM sessions, the Lambda
runtime, the seams, core and the demo runner were (a package of modules, each saying in its docstring
what belongs in it), and as the API's routes (one Powertools Router per resource) and BudgetAlertsFunction's
schedule were. Counted as ``wc -l`` counts: lines of the file, comments and docstrings included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 600
# The product: the layer, the functions' handlers, the CLI and the Slurm agent.
PRODUCT = ("layers", "functions", "cli/src", "agent")


def line_count(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def oversized(root: Path, limit: int, base: Path | None = None) -> list[str]:
    """Each module under ``root`` longer than ``limit`` lines, named from ``base`` (``root``'s parent
    unless given)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(base or root.parent).as_posix()
        lines = line_count(path)
        if lines > limit:
            found.append(f"{name}: {lines} lines (at most {limit})")
    return found


def test_no_sandbox_module_is_over_600_lines() -> None:
    too_long = oversized(REPO / "sandbox", MAX_LINES)
    assert not too_long, "split these by job (tests/unit/test_module_size.py):\n" + "\n".join(too_long)


@pytest.mark.parametrize("tree", PRODUCT)
def test_no_product_module_is_over_600_lines(tree: str) -> None:
    assert (REPO / tree).is_dir(), f"{tree} moved: name its new place in PRODUCT"
    too_long = oversized(REPO / tree, MAX_LINES, base=REPO)
    assert not too_long, "split these by job (tests/unit/test_module_size.py):\n" + "\n".join(too_long)


def test_no_test_module_is_over_600_lines() -> None:
    # A test module is split by topic, its shared fixtures and helpers moved (not copied) into a
    # support module beside it (tests/unit/api_stack.py, cli_support.py, ...).
    too_long = oversized(REPO / "tests", MAX_LINES, base=REPO)
    assert not too_long, "split these by topic (tests/unit/test_module_size.py):\n" + "\n".join(too_long)


@pytest.mark.parametrize(("lines", "fails"), [(600, False), (601, True)])
def test_the_limit_is_a_ceiling(tmp_path: Path, lines: int, fails: bool) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "m.py").write_text("x = 1\n" * lines)
    assert bool(oversized(tmp_path / "s", MAX_LINES)) is fails
