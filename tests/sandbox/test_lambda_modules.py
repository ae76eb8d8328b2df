"""Per-environment modules in one interpreter (sandbox/emulator/lambda_modules.py): two module spaces import
the same names at once, each sees its own copy by every route Python has to a module."""

from __future__ import annotations

import importlib
import sys
import threading
import uuid
from pathlib import Path

import pytest

from sandbox.emulator import lambda_modules


def _package(root: Path, name: str, tag: str) -> None:
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"TAG = {tag!r}\nfrom . import sub\n")
    (package / "sub.py").write_text(
        f"import {name}\n"
        "def tags():\n"
        f"    from {name} import lazy  # imported at call time, not at init\n"
        f"    import {name}.lazy as again\n"
        f"    return {name}.TAG, lazy.TAG, again.TAG, importlib.import_module('{name}.lazy').TAG\n"
        "import importlib\n"
    )
    # as pydantic resolves a model's annotations: through sys.modules, while the module still runs
    (package / "lazy.py").write_text(
        f"import sys\nTAG = {tag!r} + '-lazy'\nassert sys.modules[__name__].TAG == TAG\n"
    )


def test_two_spaces_import_one_name_at_once_and_each_sees_its_own(tmp_path: Path) -> None:
    name = f"pkg_{uuid.uuid4().hex}"  # a name no other test views
    _package(tmp_path / "a", name, "a")
    _package(tmp_path / "b", name, "b")
    lambda_modules.view({name})
    spaces = {tag: lambda_modules.ModuleSpace([str(tmp_path / tag)]) for tag in ("a", "b")}
    both_imported = threading.Barrier(2, timeout=10)
    seen: dict[str, object] = {}

    def run(tag: str) -> None:
        with lambda_modules.running_in(spaces[tag]):
            package = importlib.import_module(name)
            both_imported.wait()  # the other space has imported the same names meanwhile
            sub = sys.modules[f"{name}.sub"]  # as pydantic / dataclasses / typing look a module up
            seen[tag] = (package.sub.tags(), sub.tags.__globals__["__file__"])

    threads = [threading.Thread(target=run, args=(tag,)) for tag in spaces]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert seen["a"] == (("a", "a-lazy", "a-lazy", "a-lazy"), str(tmp_path / "a" / name / "sub.py"))
    assert seen["b"] == (("b", "b-lazy", "b-lazy", "b-lazy"), str(tmp_path / "b" / name / "sub.py"))
    # sys.modules holds views only; the host (no space) has no such package
    assert lambda_modules.is_view(sys.modules[name])
    assert f"{name}.lazy" in spaces["a"].modules
    with pytest.raises(AttributeError, match=f"No module named '{name}'"):
        sys.modules[name].TAG  # noqa: B018
    assert getattr(sys.modules[name], "TAG", None) is None  # walkers of sys.modules pass over it


def test_an_import_error_in_a_space_is_raised_and_retried(tmp_path: Path) -> None:
    name = f"broken_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text("raise RuntimeError('at import')\n")
    lambda_modules.view({name})
    space = lambda_modules.ModuleSpace([str(tmp_path)])
    with lambda_modules.running_in(space), pytest.raises(RuntimeError, match="at import"):
        importlib.import_module(name)
    assert name not in space.modules  # a failed import leaves nothing half-initialised behind
    (tmp_path / f"{name}.py").write_text("OK = True\n")
    importlib.invalidate_caches()
    with lambda_modules.running_in(space):
        assert importlib.import_module(name).OK
