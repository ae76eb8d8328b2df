"""Each Lambda execution environment's own modules, in one interpreter, with environments running at once.

On Lambda every execution environment is its own process: two concurrent invocations of a function,
or of two functions, never share a module, a cache or a Powertools metric set. Here they share one
interpreter, whose ``sys.modules`` is global, and the sandbox must not serialise them to keep their
modules apart (that hid every race between two invocations). So:

- The names function code provides (the top-level modules of each CodeUri and layer, and the packages
  in ``PER_ENVIRONMENT_PACKAGES``) are never real modules in ``sys.modules``: each entry is a
  ``_ModuleView`` that forwards every attribute to the module of that name in the *calling thread's*
  module space (``running_in``), else in the host's (the test runner's own copy).
- A ``ModuleSpace`` imports its modules on first use, from its directories then ``sys.path`` (as
  Lambda's path puts the task root and layers first), into its own dict, never into ``sys.modules``.

So ``import autopilot.x``, ``from . import y``, a lazy import inside a function, ``importlib``, and the
``sys.modules[cls.__module__]`` lookups of pydantic, dataclasses and typing all see the module of the
environment whose thread runs, and nothing has to be swapped in or locked. Modules the function code
does not provide (boto3, botocore, pydantic, moto, the standard library) stay shared, as moto's mock
must patch the one botocore every function calls through; they are thread-safe or used per client.
Limits: a thread the handler starts sees the host's modules (as it sees the host's ``os.environ``), and
importing a name only another environment provides binds its view (the import statement finds it in
``sys.modules``) and fails with ``AttributeError`` at first use, not ``ModuleNotFoundError`` at the import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Final

# Packages a layer ships that keep process-wide state on their classes: Powertools' Metrics keeps
# one metric set per process in class attributes, so two functions sharing one copy would flush each
# other's metrics (or fail "dictionary changed size during iteration"). Each environment gets its own.
PER_ENVIRONMENT_PACKAGES: Final = frozenset({"aws_lambda_powertools"})


# A module name -> what to do to each environment's copy once it is imported (a seam pointing a layer's
# function somewhere, e.g. sandbox/emulator/product_clock.py).
IMPORT_HOOKS: Final[dict[str, Callable[[ModuleType], None]]] = {}


class ModuleSpace:
    """Modules by name, imported on first use from ``directories`` (then ``sys.path``); None: the host's."""

    def __init__(self, directories: Iterable[str] | None = None) -> None:
        self.directories = list(directories) if directories is not None else None
        self.modules: dict[str, ModuleType] = {}
        self._lock = threading.RLock()  # the host's space is shared by every host thread

    def module(self, name: str) -> ModuleType:
        found = self.modules.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self.modules.get(name)
            if found is not None:
                return found
            parent_name, _, child = name.rpartition(".")
            parent = self.module(parent_name) if parent_name else None
            if parent is None:
                search = [*(self.directories or []), *sys.path]
            else:
                search = list(getattr(parent, "__path__", None) or [])
                if not search:
                    raise ModuleNotFoundError(
                        f"No module named {name!r}; {parent_name!r} is not a package", name=name
                    )
            spec = importlib.machinery.PathFinder.find_spec(name, search)
            if spec is None or spec.loader is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            module = importlib.util.module_from_spec(spec)
            self.modules[name] = module  # visible to circular imports while it runs, as sys.modules is
            try:
                spec.loader.exec_module(module)
            except BaseException:
                self.modules.pop(name, None)
                raise
            if parent is not None:
                setattr(parent, child, module)
            hook = IMPORT_HOOKS.get(name)
            if hook is not None:
                hook(module)
            return module


HOST: Final = ModuleSpace()
_running: Final[ContextVar[ModuleSpace | None]] = ContextVar("module_space", default=None)


def current() -> ModuleSpace:
    return _running.get() or HOST


@contextmanager
def running_in(space: ModuleSpace) -> Iterator[None]:
    """Code run in this context (this thread) imports and reads ``space``'s modules."""
    token = _running.set(space)
    try:
        yield
    finally:
        _running.reset(token)


class _ModuleView(ModuleType):
    """``sys.modules``' entry for a name function code provides: the calling thread's module of that name."""

    def _target(self) -> ModuleType:
        return current().module(ModuleType.__getattribute__(self, "__name__"))

    def __getattribute__(self, attribute: str) -> Any:
        if ModuleType.__getattribute__(self, "__dict__").get("_view_pending"):
            # the import system reading a new view before it is in sys.modules: importing the module now
            # would run its code while sys.modules[__name__] is missing (pydantic resolves by it)
            return ModuleType.__getattribute__(self, attribute)
        try:
            target = _ModuleView._target(self)
        except ModuleNotFoundError as missing:
            # no such module in this space: an AttributeError, so code that walks sys.modules with
            # getattr(module, name, default) (pickle, inspect, warnings) passes over the view
            raise AttributeError(f"{missing} (in this execution environment)", name=attribute) from missing
        return getattr(target, attribute)

    def __setattr__(self, attribute: str, value: Any) -> None:
        if attribute.startswith("__") and attribute.endswith("__"):
            return  # the import system stamping its spec and loader on the view: the module has its own
        setattr(_ModuleView._target(self), attribute, value)

    def __delattr__(self, attribute: str) -> None:
        delattr(_ModuleView._target(self), attribute)

    def __dir__(self) -> list[str]:
        return dir(_ModuleView._target(self))

    def __repr__(self) -> str:
        return f"<module view {ModuleType.__getattribute__(self, '__name__')!r}>"


class _ViewFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on ``sys.meta_path``: an import of a viewed name puts a view in ``sys.modules``."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in _viewed:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        view = _ModuleView(spec.name)
        ModuleType.__setattr__(view, "_view_pending", True)
        return view

    def exec_module(self, module: ModuleType) -> None:
        ModuleType.__delattr__(module, "_view_pending")  # the view is in sys.modules now
        _ModuleView._target(module)  # type: ignore[arg-type]  # import it now: a missing module fails the import


_viewed: Final[set[str]] = set()
_FINDER: Final = _ViewFinder()
_install_lock: Final = threading.Lock()


def view(names: Iterable[str]) -> None:
    """Serve these top-level names (and their submodules) per module space from now on; the host's
    modules already imported under them move to the host's space."""
    with _install_lock:
        new = set(names) - _viewed
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
        if not new:
            return
        _viewed.update(new)
        for name, module in list(sys.modules.items()):
            if name.partition(".")[0] in new and module is not None and not isinstance(module, _ModuleView):
                HOST.modules[name] = module
                sys.modules[name] = _ModuleView(name)


def is_view(module: object) -> bool:
    return isinstance(module, _ModuleView)
