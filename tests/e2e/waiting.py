"""Waiting in e2e tests: on a condition, with a deadline, never on wall-clock durations."""

from __future__ import annotations

import time
from collections.abc import Callable

from sandbox.harness.core import Sandbox

DEADLINE_S = 60.0


def wait_for[T](check: Callable[[], T | None], *, what: str, advance: Sandbox | None = None) -> T:
    """Poll ``check`` until it returns something (moving the clock 30 s a round when ``advance``)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        if advance is not None:
            advance.advance(30)
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {DEADLINE_S} s")
