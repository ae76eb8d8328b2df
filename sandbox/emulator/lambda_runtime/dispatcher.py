"""The AsyncDispatcher: Lambda's asynchronous queue and the sandbox's deferred deliveries, run on
worker threads after an optional delay.
"""

from __future__ import annotations

import heapq
import threading
import time
import traceback
from collections.abc import Callable


class AsyncDispatcher:
    """One worker thread starting deliveries in due order (async invokes, event deliveries); work
    submitted with ``spawn`` (an asynchronous invocation) runs in a thread of its own, at once with the
    rest, as Lambda runs queued events in as many environments as are free."""

    def __init__(self, name: str = "sandbox-dispatcher") -> None:
        self._heap: list[tuple[float, int, Callable[[], None], bool]] = []
        self._condition = threading.Condition()
        self._sequence = 0
        self._busy = False
        self._spawned = 0  # spawned work still running
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.errors: list[BaseException] = []

    def submit(self, work: Callable[[], None], delay: float = 0.0, *, spawn: bool = False) -> None:
        with self._condition:
            if self._stopping:
                return
            self._sequence += 1
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, delay), self._sequence, work, spawn))
            self._condition.notify_all()

    def pending(self) -> int:
        with self._condition:
            return len(self._heap) + (1 if self._busy else 0) + self._spawned

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until nothing is queued or running; False when ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._heap or self._busy or self._spawned:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(min(remaining, 0.05))
        return True

    def stop(self, timeout: float = 5.0) -> None:
        with self._condition:
            self._stopping = True
            self._heap.clear()
            self._condition.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._stopping and (not self._heap or self._heap[0][0] > time.monotonic()):
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._condition.wait(wait if wait is None else max(0.001, wait))
                if self._stopping:
                    return
                _, _, work, spawn = heapq.heappop(self._heap)
                if spawn:
                    self._spawned += 1
                else:
                    self._busy = True
            if spawn:
                threading.Thread(
                    target=self._work, args=(work, True), name="sandbox-async-invoke", daemon=True
                ).start()
            else:
                self._work(work, False)

    def _work(self, work: Callable[[], None], spawned: bool) -> None:
        try:
            work()
        except Exception as error:  # noqa: BLE001 - a failed delivery must not kill the worker
            self.errors.append(error)
            traceback.print_exc()
        finally:
            with self._condition:
                if spawned:
                    self._spawned -= 1
                else:
                    self._busy = False
                self._condition.notify_all()
