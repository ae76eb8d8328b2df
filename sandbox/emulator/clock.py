"""The sandbox clock: simulated time that runs faster than wall time and can be advanced by hand.

HyperPod creation takes ~20 minutes in AWS; at ``speed=600`` the sandbox's simulated clock covers
that in 2 s of wall time. Simulators read ``now()`` and never ``time.time()``, so the same scenario
can run fast (demo, tests) or be stepped deterministically (``advance``).

Only waiting is sped up. While the control plane works (a Lambda function runs or waits for its turn:
``working()``; a Step Functions execution is between two waits: ``set_work`` from
sandbox.emulator.stepfunctions.clock), simulated time passes at real speed (x1; a frozen clock stays frozen),
as the same work would take on AWS. A control plane starved of CPU (a loaded machine, two test runs
side by side) then takes longer in wall time but not in simulated time: at x1200, six wall seconds of
a starved aws-sdk task were two simulated hours, past the create workflow's deadline, before this.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta


class SandboxClock:
    """Simulated time = start + wall time idle x speed + wall time working x 1 + manual advances."""

    def __init__(
        self,
        speed: float = 600.0,
        start: datetime | None = None,
        *,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0 (0 freezes the clock; use advance())")
        self._speed = speed
        self._working_speed = min(speed, 1.0)
        self._start = start or datetime.now(UTC)
        self._wall = wall  # wall seconds, monotonic (a test gives a fake)
        self._base_wall = wall()  # elapsed() was _base_elapsed at this wall time
        self._base_elapsed = 0.0
        self._offset = 0.0
        self._working = 0  # work in progress: working() blocks
        self._sources: dict[str, int] = {}  # and work a source counts itself (set_work)
        self._sleeping = 0  # work waiting in sleep(): not work meanwhile
        self._lock = threading.Lock()

    @property
    def speed(self) -> float:
        return self._speed

    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        with self._lock:
            return self._base_elapsed + (self._wall() - self._base_wall) * self._rate() + self._offset

    def _work(self) -> int:
        return max(0, self._working + sum(self._sources.values()) - self._sleeping)

    def _rate(self) -> float:
        return self._working_speed if self._work() else self._speed

    def _rebase(self) -> None:
        """Fold the time so far into the base, before the rate changes (call holding the lock)."""
        now = self._wall()
        self._base_elapsed += (now - self._base_wall) * self._rate()
        self._base_wall = now

    @property
    def working_now(self) -> int:
        """How much control-plane work is in progress."""
        with self._lock:
            return self._work()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Control-plane work: simulated time passes at real speed until it ends."""
        with self._lock:
            self._rebase()
            self._working += 1
        try:
            yield
        finally:
            with self._lock:
                self._rebase()
                self._working -= 1

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulated time from inside work (a call AWS is slow to answer: a latency
        fault): the caller's work does not count meanwhile. Never longer than ``seconds`` of wall time
        (a frozen clock: real time)."""
        deadline, wall_deadline = self.elapsed() + seconds, self._wall() + seconds
        with self._lock:
            self._rebase()
            self._sleeping += 1
        try:
            while (remaining := deadline - self.elapsed()) > 0 and (left := wall_deadline - self._wall()) > 0:
                time.sleep(min(self.wall_seconds(remaining), left, 0.05))
        finally:
            with self._lock:
                self._rebase()
                self._sleeping -= 1

    def set_work(self, source: str, amount: int) -> None:
        """How much work ``source`` has in progress now (it counts its own: Step Functions executions)."""
        with self._lock:
            self._rebase()
            self._sources[source] = max(0, amount)

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.elapsed())

    def advance(self, seconds: float) -> None:
        """Jump simulated time forward (tests step lifecycles deterministically this way)."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds

    def wall_seconds(self, simulated_seconds: float) -> float:
        """How long ``simulated_seconds`` take in wall time while the control plane is idle (a waiter
        re-reads the clock: work in progress makes it later)."""
        return simulated_seconds / self._speed if self._speed else float("inf")
