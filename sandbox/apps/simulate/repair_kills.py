"""What a repair kills: the work lost by a job that a reboot or replace of one of its nodes ends.

A fault that already took the node's GPUs (``NvidiaErrorTerminate``: the product's ``GPU_LOST_FAULTS``,
layers/autopilot/autopilot/logic/healing/decide.py) ended the job itself; both policies requeue it at
once, so no repair kills it. After any other fault (``NvidiaErrorReboot``) the GPUs stay until the
reboot and the job runs on, and the policies differ:

- ``hyperpod`` (HyperPod's own repair, no drain): the reboot or replace starts at once and kills the
  job; the work since its last checkpoint is lost.
- ``autopilot`` (drain first, RequeueJobsOnRepair=true): the node is drained; a job that ends within
  DrainTimeoutMinutes loses nothing; one still running then is requeued, which restarts it from its
  checkpoint: the work since that checkpoint (at the requeue, DrainTimeoutMinutes later) is lost.

A job that never checkpoints loses its whole run. Times are seconds; a job's GPU-hours lost are the
seconds lost times its GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.apps.simulate.failures import REBOOT

POLICIES = ("hyperpod", "autopilot")


@dataclass(frozen=True)
class JobOnNode:
    """The job on the node being repaired, at the fault."""

    run_s: float  # since its current run began (negative: still restarting, for that long)
    checkpoint_s: float | None  # its checkpoint interval (None: it never checkpoints)
    remaining_s: float | None = None  # until it ends (None: not within any drain)


def gpus_lost(fault_type: str | None) -> bool:
    """Whether the fault took the node's GPUs (the simulation's faults: all but ``NvidiaErrorReboot``)."""
    return fault_type != REBOOT


def _since_checkpoint(run_s: float, checkpoint_s: float | None) -> float:
    if run_s <= 0:  # killed while restarting: its checkpoint is where it starts from
        return 0.0
    return run_s if checkpoint_s is None else run_s % checkpoint_s


def killed_work_s(policy: str, job: JobOnNode, *, fault_type: str | None, drain_timeout_s: float) -> float:
    """Seconds of ``job``'s work a repair of its node after ``fault_type`` kills under ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}")
    if gpus_lost(fault_type):
        return 0.0  # the fault ended the job, not the repair
    if policy == "hyperpod":
        return _since_checkpoint(job.run_s, job.checkpoint_s)
    if job.remaining_s is not None and job.remaining_s <= drain_timeout_s:
        return 0.0  # it ends while the node drains
    return _since_checkpoint(job.run_s + drain_timeout_s, job.checkpoint_s)
