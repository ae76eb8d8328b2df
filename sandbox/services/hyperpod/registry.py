"""The HyperPod simulators, one per (account, region), every pair served on first use.

AWS answers SageMaker's cluster operations in every region, so the sandbox does too. The
simulators installed by hand (the Sandbox's home region, a test's simulator) are *installed*; a
request for any other (account, region) gets one *spawned* from the first installed simulator
(``HyperPodSimulator.spawn``: the same clock, timings and event options, a seed derived from its
own). Both seams (responses.py for SageMaker, tagging.py for the Resource Groups Tagging API) look
simulators up here; they are installed with the first installed simulator and given back to moto,
together with every spawned simulator, when the last one is uninstalled.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.services.hyperpod.simulator import HyperPodSimulator

Key = tuple[str, str]  # (account, region)


class SimulatorRegistry:
    """At most one simulator per (account, region): installed ones first, else one spawned on demand."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._installed: dict[Key, HyperPodSimulator] = {}
        self._spawned: dict[Key, HyperPodSimulator] = {}

    def get(self, account_id: str, region: str) -> HyperPodSimulator | None:
        """The simulator serving (account, region), spawned if none is yet; None when none is installed."""
        key = (account_id, region)
        with self._lock:
            found = self._installed.get(key) or self._spawned.get(key)
            if found is None and self._installed:
                template = next(iter(self._installed.values()))
                found = self._spawned[key] = template.spawn(account_id, region)
            return found

    def all(self) -> list[HyperPodSimulator]:
        with self._lock:
            return [*self._installed.values(), *self._spawned.values()]

    def add(self, simulator: HyperPodSimulator) -> None:
        """Install ``simulator`` for its (account, region)."""
        key = (simulator.account_id, simulator.region)
        with self._lock:
            current = self._installed.get(key) or self._spawned.get(key)
            if current is not None and current is not simulator:
                raise RuntimeError(f"a HyperPod simulator is already installed for {key}")
            self._installed[key] = simulator

    def remove(self, simulator: HyperPodSimulator) -> bool:
        """Forget ``simulator`` (if installed); True when no installed one is left (spawned ones go too)."""
        key = (simulator.account_id, simulator.region)
        with self._lock:
            if self._installed.get(key) is simulator:
                del self._installed[key]
            if self._installed:
                return False
            self._spawned.clear()
            return True


SIMULATORS = SimulatorRegistry()
