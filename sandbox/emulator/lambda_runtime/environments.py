"""Execution environments: a thread per environment with its own modules, identity and per-thread
``os.environ`` (``_ThreadEnviron``), running one invocation at a time and killed past its timeout;
a function's pool of them.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from sandbox.emulator import lambda_modules
from sandbox.emulator.deploy import FunctionSpec
from sandbox.emulator.invocation import CURRENT_FUNCTION
from sandbox.emulator.lambda_runtime.results import EVENT_ENVIRONMENTS, LambdaContext, error_payload

if TYPE_CHECKING:
    from sandbox.emulator.lambda_runtime.runtime import LambdaRuntime


class _Killed(BaseException):
    """Raised in a timed-out environment's thread: ends its invocation as Lambda ends the process
    (a BaseException, so the handler's ``except Exception`` does not swallow it)."""


@dataclass
class Invocation:
    """One invocation handed to an environment's thread; the caller waits on ``started`` / ``done``."""

    body: bytes
    request_id: str
    started: threading.Event = field(default_factory=threading.Event)  # initialised, handler called
    done: threading.Event = field(default_factory=threading.Event)
    deadline: float = 0.0
    cold: bool = False
    payload: bytes = b""
    function_error: str | None = None


class Environment:
    """One execution environment: a thread that runs one invocation at a time with the function's
    own modules (a ``ModuleSpace``), identity (``CURRENT_FUNCTION``) and, per invocation, environ."""

    def __init__(self, runtime: LambdaRuntime, spec: FunctionSpec, number: int) -> None:
        self.runtime = runtime
        self.spec = spec
        self.space = lambda_modules.ModuleSpace(
            [
                str(spec.code_dir),
                *(str(d) for d in spec.layer_dirs),
                *(str(d / "python") for d in spec.layer_dirs if (d / "python").is_dir()),
            ]
        )
        self.handler: Callable[[Any, LambdaContext], Any] | None = None
        self._work: queue.SimpleQueue[Invocation | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=f"lambda-{spec.name}-{number}", daemon=True)
        self.thread.start()

    def run(self, invocation: Invocation) -> None:
        self._work.put(invocation)

    def stop(self) -> None:
        self._work.put(None)

    def kill(self) -> None:
        """End the invocation running in this environment now (at its thread's next bytecode)."""
        if self.thread.ident is not None and self.thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.thread.ident), ctypes.py_object(_Killed)
            )

    def _serve(self) -> None:
        CURRENT_FUNCTION.set(self.spec)
        try:
            with lambda_modules.running_in(self.space):
                while (invocation := self._work.get()) is not None:
                    self._invoke(invocation)
        except _Killed:
            return  # a timed-out environment ends here; the runtime no longer uses it

    def _invoke(self, invocation: Invocation) -> None:
        runtime, spec = self.runtime, self.spec
        environ = _thread_environ()
        environ.enter(runtime._function_environ(spec, environ.host))
        try:
            invocation.cold = self.handler is None
            try:
                event = json.loads(invocation.body) if invocation.body.strip() else {}
            except ValueError as error:
                invocation.payload = error_payload(
                    "Runtime.UnmarshalError", f"Unable to unmarshal input: {error}", invocation.request_id
                )
                invocation.function_error = "Unhandled"
                return
            try:
                handler = runtime._load_handler(self)
            except InitError as error:
                invocation.payload = error_payload(
                    error.error_type, str(error), invocation.request_id, with_trace=False
                )
                invocation.function_error = "Unhandled"
                return
            invocation.deadline = time.monotonic() + spec.timeout
            invocation.started.set()
            invocation.payload, invocation.function_error = runtime._run_handler(
                self, handler, event, invocation.request_id, invocation.deadline
            )
        finally:
            environ.leave()
            invocation.done.set()
            invocation.started.set()  # after done: a caller woken here by an init error sees it done


class Function:
    """A function's environments: the idle ones, how many run now, its reserved concurrency."""

    def __init__(self, spec: FunctionSpec) -> None:
        self.spec = spec
        self.idle: list[Environment] = []
        self.created = 0
        self.lock = threading.Lock()
        # Event invocations (schedules, async events) run at most this many at once per function: on a
        # machine of two cores, a 5-minute schedule fired a hundred times by one clock jump would start a
        # hundred cold environments at once and starve everything (Lambda's queue delivers them later)
        self.event_slots = threading.BoundedSemaphore(EVENT_ENVIRONMENTS)


class InitError(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def provided_names(directories: list[Path]) -> frozenset[str]:
    """Top-level module names a CodeUri / layer directory provides (app, autopilot, …)."""
    names: set[str] = set()
    for directory in directories:
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            if entry.suffix == ".py":
                names.add(entry.stem)
            elif entry.is_dir() and entry.name.isidentifier():
                names.add(entry.name)
    return frozenset(names)


class _ThreadEnviron(MutableMapping[str, str]):
    """``os.environ`` with a per-thread view: a thread running a function reads and writes that
    invocation's private dict (a stack: a handler may invoke another function synchronously);
    every other thread reads and writes the process's own mapping, ``host``."""

    def __init__(self, host: MutableMapping[str, str]) -> None:
        self.host = host
        self._local = threading.local()

    def enter(self, environ: dict[str, str]) -> None:
        self._stack().append(environ)

    def leave(self) -> None:
        self._stack().pop()

    # what os._Environ offers beyond a MutableMapping: copy() and the | operators
    def copy(self) -> dict[str, str]:
        return dict(self._current())

    def __or__(self, other: Mapping[str, str]) -> dict[str, str]:
        return {**self._current(), **other}

    def __ror__(self, other: Mapping[str, str]) -> dict[str, str]:
        return {**other, **self._current()}

    def __ior__(self, other: Mapping[str, str]) -> _ThreadEnviron:
        self.update(other)
        return self

    def _stack(self) -> list[dict[str, str]]:
        stack: list[dict[str, str]] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _current(self) -> MutableMapping[str, str]:
        stack = self._stack()
        return stack[-1] if stack else self.host

    def __getitem__(self, key: str) -> str:
        return self._current()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._current()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"_ThreadEnviron({self._current()!r})"


_ENVIRON_LOCK: Final = threading.Lock()


def _thread_environ() -> _ThreadEnviron:
    """Install the per-thread ``os.environ`` (once per process; host threads see no difference)."""
    with _ENVIRON_LOCK:
        if not isinstance(os.environ, _ThreadEnviron):
            # a view over the same mapping, not a replacement of its contents
            os.environ = _ThreadEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003
        return os.environ  # type: ignore[return-value]
