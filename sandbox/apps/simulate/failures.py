"""The failure model: Llama 3's interruption causes, each mapped to what HMA reports and what fixes it.

Source: "The Llama 3 Herd of Models" (Meta, arXiv:2407.21783, section 3.3.4, Table 5): a 54-day snapshot
of pre-training on 16,384 H100 GPUs (2,048 nodes of 8) had 466 job interruptions, 47 planned (firmware
upgrades, configuration and dataset updates) and 419 unexpected, about 78 % of these confirmed or
suspected hardware. The counts below are Table 5's; the table's own percentages do not all match its
counts (148 faulty-GPU interruptions are printed as 30.1 %, 148 / 419 is 35.3 %), the counts are used.
Planned interruptions are left out: a healing policy does nothing about them.

How each cause reaches the control plane (our reading; Meta does not say how the faults were fixed):

- a cause with an HMA ``fault_type`` turns one node unhealthy (the simulator's ``node_unhealthy``
  fault): ``NvidiaErrorTerminate`` asks for a replace (HMA's "Please Replace the Faulty Node."),
  ``NvidiaErrorReboot`` for a reboot. The simulator knows no network, host or storage fault types, so
  a cause that needs new hardware (a NIC, a PSU, a cable on the node's rail, an instance retired for
  host maintenance) is reported as ``NvidiaErrorTerminate``: what matters here is the repair it needs.
- ``reboot_heals`` is the share of a cause's faults a reboot clears; the others are injected with
  ``reboot_does_not_heal``, so the reboot leaves the node unhealthy and the replace follows (HyperPod's
  own escalation or Autopilot's). GPU SRAM and GSP errors clear on a GPU reset; an HBM3 error clears
  when the reset remaps the row, which fails when the bank has no spare rows left (assumed 1 in 5).
- a cause without a ``fault_type`` (a software bug, an NCCL watchdog timeout, a dependency) fails the
  job and no node: it restarts on the same nodes, and no healing policy changes what it costs.

Rates: the node-level causes' 356 interruptions over 2,048 nodes x 54 days give each node a fault every
~310 days on average (Poisson), spares included (idle nodes are assumed to fail as often); the 63
job-level interruptions scale with the job's node count. ``rate_scale`` multiplies both (the fast test
uses it to see failures on a few nodes in a few days).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

LLAMA3_NODES: Final = 2048
LLAMA3_DAYS: Final = 54
REPLACE: Final = "NvidiaErrorTerminate"
REBOOT: Final = "NvidiaErrorReboot"


@dataclass(frozen=True)
class Cause:
    name: str
    interruptions: int  # in Llama 3's 54-day snapshot (Table 5)
    fault_type: str | None  # what HMA reports on the node; None: the job fails, no node does
    reboot_heals: float = 1.0  # the share of these faults a reboot clears (reboot-type faults)


CAUSES: Final = (
    Cause("Faulty GPU", 148, REPLACE),
    Cause("GPU HBM3 memory", 72, REBOOT, reboot_heals=0.8),
    Cause("Software bug", 54, None),
    Cause("Network switch/cable", 35, REPLACE),
    Cause("Host maintenance (unplanned)", 32, REPLACE),
    Cause("GPU SRAM memory", 19, REBOOT),
    Cause("GPU system processor", 17, REBOOT),
    Cause("NIC", 7, REPLACE),
    Cause("NCCL watchdog timeouts", 7, None),
    Cause("Silent data corruption", 6, REPLACE),
    Cause("GPU thermal interface + sensor", 6, REPLACE),
    Cause("SSD", 3, REPLACE),
    Cause("Power supply", 3, REPLACE),
    Cause("Server chassis", 2, REPLACE),
    Cause("IO expansion board", 2, REPLACE),
    Cause("Dependency", 2, None),
    Cause("CPU", 2, REPLACE),
    Cause("System memory", 2, REPLACE),
)
SNAPSHOT_SECONDS: Final = LLAMA3_DAYS * 86400.0


@dataclass(frozen=True)
class Failure:
    at_s: float  # simulated seconds after the simulation's start
    slot: int | None  # the worker it hits (0 .. nodes + spares - 1); None: the job itself fails
    cause: str
    fault_type: str | None
    reboot_heals: bool


def node_causes() -> list[Cause]:
    return [c for c in CAUSES if c.fault_type is not None]


def job_causes() -> list[Cause]:
    return [c for c in CAUSES if c.fault_type is None]


def node_rate_per_s(rate_scale: float = 1.0) -> float:
    """Faults per node per simulated second."""
    return rate_scale * sum(c.interruptions for c in node_causes()) / (LLAMA3_NODES * SNAPSHOT_SECONDS)


def job_rate_per_s(nodes: int, rate_scale: float = 1.0) -> float:
    """Job-level failures per simulated second of a job on ``nodes`` nodes."""
    return rate_scale * sum(c.interruptions for c in job_causes()) * nodes / (LLAMA3_NODES * SNAPSHOT_SECONDS)


def failure_trace(
    *, nodes: int, slots: int, seconds: float, seed: int, rate_scale: float = 1.0
) -> list[Failure]:
    """Every failure of a run, in time order: node faults on ``slots`` workers (the job's nodes and the
    most spares any cluster has; a cluster with fewer spares ignores the slots it does not have, so
    every spare count sees the same faults on the nodes it shares) and the job's own failures."""
    rng = random.Random(seed)
    failures: list[Failure] = []
    for causes, rate, on_node in (
        (node_causes(), node_rate_per_s(rate_scale) * slots, True),
        (job_causes(), job_rate_per_s(nodes, rate_scale), False),
    ):
        weights = [c.interruptions for c in causes]
        at = 0.0
        while rate > 0:
            at += rng.expovariate(rate)
            if at >= seconds:
                break
            cause = rng.choices(causes, weights)[0]
            failures.append(
                Failure(
                    at_s=at,
                    slot=rng.randrange(slots) if on_node else None,
                    cause=cause.name,
                    fault_type=cause.fault_type,
                    reboot_heals=rng.random() < cause.reboot_heals,
                )
            )
    return sorted(failures, key=lambda f: f.at_s)
