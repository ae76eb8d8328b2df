"""What time it is, for every record, deadline and decision Autopilot makes.

One function, read at each call (``clock.now()``, never imported by name), so that everything the
control plane writes and compares comes from one clock: on AWS the system's; in the sandbox, its
simulated clock, on which Step Functions and HyperPod run too (sandbox/emulator/product_clock.py).
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)
