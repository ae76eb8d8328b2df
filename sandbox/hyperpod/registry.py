"""The HyperPod simulators a seam serves, keyed by (account, region).

Both HyperPod seams (responses.py for SageMaker, tagging.py for the Resource Groups Tagging API)
keep one of these: a seam is installed with its first simulator and given back to moto with its last.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.hyperpod.simulator import HyperPodSimulator


class SimulatorRegistry:
    """At most one simulator per (account, region)."""

    def __init__(self, registered_as: str) -> None:
        self._registered_as = registered_as  # how the duplicate-registration error words it
        self._lock = threading.Lock()
        self._simulators: dict[tuple[str, str], HyperPodSimulator] = {}

    def get(self, account_id: str, region: str) -> HyperPodSimulator | None:
        with self._lock:
            return self._simulators.get((account_id, region))

    def add(self, simulator: HyperPodSimulator) -> None:
        key = (simulator.account_id, simulator.region)
        with self._lock:
            current = self._simulators.get(key)
            if current is not None and current is not simulator:
                raise RuntimeError(f"a HyperPod simulator is already {self._registered_as} for {key}")
            self._simulators[key] = simulator

    def remove(self, simulator: HyperPodSimulator) -> bool:
        """Forget ``simulator`` (if it is the one registered); True when no simulator is left."""
        key = (simulator.account_id, simulator.region)
        with self._lock:
            if self._simulators.get(key) is simulator:
                del self._simulators[key]
            return not self._simulators
