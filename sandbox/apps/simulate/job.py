"""The training job: the workload whose time a healing policy saves (not part of the control plane).

The job needs ``nodes`` healthy workers. It checkpoints every ``checkpoint_s`` of running; an
interruption (one of its nodes turns unhealthy, or the job itself fails) loses the work since its last
checkpoint. Once ``nodes`` workers serve (Running, healthy, idle: what Slurm would schedule on), it
restarts in ``restart_s`` (Slurm auto-resume: requeue, load the checkpoint) on the nodes it had that
still serve, then on spares. ETTR (effective training time ratio) is the training kept over the time
simulated. Checkpoints are assumed free (asynchronous); a fault during the restart restarts it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class JobState(StrEnum):
    RUNNING = "running"
    RESTARTING = "restarting"  # on its nodes, loading the checkpoint, until ``restart_done_s``
    WAITING = "waiting"  # for enough healthy nodes


@dataclass(frozen=True)
class JobSettings:
    nodes: int
    checkpoint_s: float
    restart_s: float


class TrainingJob:
    """Time only moves forward; every call names the simulated second it happens at."""

    def __init__(self, settings: JobSettings, slots: list[int], start_s: float) -> None:
        if len(slots) != settings.nodes:
            raise ValueError(f"the job needs {settings.nodes} nodes, got {len(slots)}")
        self.settings = settings
        self.slots = set(slots)
        self.state = JobState.RUNNING
        self.start_s = start_s
        self.segment_start_s = start_s  # when the current run (since the last restart) began
        self.restart_done_s = start_s
        self.trained_s = 0.0  # training time kept (up to the last checkpoint of each run)
        self.lost_s = 0.0  # work since a checkpoint lost to interruptions
        self.interruptions = 0

    def at(self, now_s: float) -> None:
        """A restart that finished by ``now_s`` becomes a run."""
        if self.state is JobState.RESTARTING and now_s >= self.restart_done_s:
            self.state = JobState.RUNNING
            self.segment_start_s = self.restart_done_s

    def interrupt(self, now_s: float) -> bool:
        """The job fails at ``now_s`` (a node of it, or itself); False when it was not up to fail."""
        self.at(now_s)
        if self.state is JobState.WAITING:
            return False
        if self.state is JobState.RUNNING:
            ran = now_s - self.segment_start_s
            lost = ran % self.settings.checkpoint_s
            self.trained_s += ran - lost
            self.lost_s += lost
        self.interruptions += 1
        self.state = JobState.WAITING
        return True

    def run_s(self, now_s: float) -> float | None:
        """Seconds since its current run began at ``now_s`` (negative: still restarting, for that long);
        None while it waits for nodes (nothing of it runs)."""
        self.at(now_s)
        if self.state is JobState.RUNNING:
            return now_s - self.segment_start_s
        if self.state is JobState.RESTARTING:
            return now_s - self.restart_done_s
        return None

    def hits(self, slot: int) -> bool:
        return slot in self.slots

    def try_restart(self, now_s: float, serving: set[int]) -> bool:
        """A waiting job restarts when ``serving`` (the slots whose node serves) has enough nodes:
        it keeps the nodes it had that serve and takes the lowest-numbered others."""
        self.at(now_s)
        if self.state is not JobState.WAITING or len(serving) < self.settings.nodes:
            return False
        kept = self.slots & serving
        extra = sorted(serving - kept)[: self.settings.nodes - len(kept)]
        self.slots = kept | set(extra)
        self.state = JobState.RESTARTING
        self.restart_done_s = now_s + self.settings.restart_s
        return True

    def finish(self, end_s: float) -> None:
        """The simulation ends: a run in progress counts in full (it goes on after the window)."""
        self.at(end_s)
        if self.state is JobState.RUNNING:
            self.trained_s += end_s - self.segment_start_s
            self.segment_start_s = end_s

    def ettr(self, end_s: float) -> float:
        return self.trained_s / (end_s - self.start_s)
