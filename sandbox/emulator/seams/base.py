"""What every seam shares: the installed state (the runtime seams route to, the undo stack, the
clock, delivery counts and errors), its lock, and replacing a moto attribute with its undo recorded.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.lambda_runtime import LambdaRuntime

# Outside a sandbox (seams.installed without a clock) Step Functions timers keep wall time.
WALL_CLOCK: Final = SandboxClock(speed=1.0)


@dataclass
class _State:
    runtime: LambdaRuntime | None = None
    undo: list[Callable[[], None]] = field(default_factory=list)
    deliveries: Counter[str] = field(default_factory=Counter)
    delivery_errors: list[str] = field(default_factory=list)
    clock: SandboxClock = field(default_factory=lambda: WALL_CLOCK)


state: Final = _State()
lock: Final = threading.Lock()


def replace(owner: type, name: str, replacement: Callable[..., Any]) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    state.undo.append(lambda: setattr(owner, name, original))


def header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key in (name, name.lower()):
        value = headers.get(key)
        if value:
            return str(value)
    return None


def use_clock(clock: SandboxClock) -> None:
    previous = state.clock
    state.clock = clock
    state.undo.append(lambda: setattr(state, "clock", previous))
