"""Seam: the control plane's own code reads the sandbox clock, as Step Functions and HyperPod do.

The layer asks one function what time it is (``autopilot.clock.now``). Left alone, its records and
deadlines would be on the wall clock while the workflows' ``$now()``, HyperPod's events and every
wait are on the sandbox clock, which runs faster while nothing works: an operation created at wall
time and updated at simulated time "took" 32 hours, and a deadline compared a wall "now" with a
simulated event time. Every execution environment imports its own copy of the layer
(sandbox/emulator/lambda_modules.py), so the seam points each copy at the clock as it is imported, and the
host's copy (tests calling the layer directly) while the sandbox runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from types import ModuleType

from sandbox.emulator import lambda_modules

MODULE = "autopilot.clock"


def install(now: Callable[[], datetime]) -> Callable[[], None]:
    """Point ``autopilot.clock.now`` at ``now`` in every copy; returns the undo."""

    def point(module: ModuleType) -> None:
        module.now = now  # type: ignore[attr-defined]

    lambda_modules.IMPORT_HOOKS[MODULE] = point
    host = sys.modules.get(MODULE)  # the host's copy (a view forwards to the host's space)
    original = getattr(host, "now", None) if host is not None else None
    if host is not None and original is not None:
        point(host)

    def undo() -> None:
        lambda_modules.IMPORT_HOOKS.pop(MODULE, None)
        if host is not None and original is not None:
            host.now = original  # type: ignore[attr-defined]

    return undo
