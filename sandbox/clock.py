"""The sandbox clock: simulated time that runs faster than wall time and can be advanced by hand.

HyperPod creation takes ~20 minutes in AWS; at ``speed=600`` the sandbox's simulated clock covers
that in 2 s of wall time. Simulators read ``now()`` and never ``time.time()``, so the same scenario
can run fast (demo, tests) or be stepped deterministically (``advance``).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SandboxClock:
    """Simulated time = start + (wall time elapsed x speed) + manual advances."""

    def __init__(self, speed: float = 600.0, start: datetime | None = None) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0 (0 freezes the clock; use advance())")
        self._speed = speed
        self._start = start or datetime.now(UTC)
        self._wall_start = time.monotonic()
        self._offset = 0.0
        self._lock = threading.Lock()

    @property
    def speed(self) -> float:
        return self._speed

    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        with self._lock:
            return (time.monotonic() - self._wall_start) * self._speed + self._offset

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.elapsed())

    def advance(self, seconds: float) -> None:
        """Jump simulated time forward (tests step lifecycles deterministically this way)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds

    def wall_seconds(self, simulated_seconds: float) -> float:
        """How long ``simulated_seconds`` take in wall time at the current speed."""
        return simulated_seconds / self._speed if self._speed else float("inf")
