"""The fleet simulation's repair-kill accounting (sandbox/apps/simulate/repair_kills.py): the work a repair
kills, HyperPod's repair without a drain vs Autopilot's drain-first repair."""

from __future__ import annotations

import pytest
from autopilot.logic.healing.decide import GPU_LOST_FAULTS

from sandbox.apps.simulate.failures import REBOOT, REPLACE, Failure
from sandbox.apps.simulate.fleet import FleetSimulation, JobRun, SimulationOptions
from sandbox.apps.simulate.job import JobSettings, TrainingJob
from sandbox.apps.simulate.repair_kills import JobOnNode, gpus_lost, killed_work_s

HOUR = 3600.0


def test_the_simulations_gpu_lost_faults_are_the_products() -> None:
    assert gpus_lost(REPLACE) == (REPLACE in GPU_LOST_FAULTS) is True
    assert gpus_lost(REBOOT) == (REBOOT in GPU_LOST_FAULTS) is False


@pytest.mark.parametrize("policy", ["hyperpod", "autopilot"])
def test_a_fault_that_took_the_gpus_ended_the_job_itself(policy: str) -> None:
    job = JobOnNode(run_s=1500, checkpoint_s=600)
    assert killed_work_s(policy, job, fault_type=REPLACE, drain_timeout_s=HOUR) == 0


def test_without_a_drain_the_repair_kills_the_work_since_the_last_checkpoint() -> None:
    assert killed_work_s("hyperpod", JobOnNode(1500, 600), fault_type=REBOOT, drain_timeout_s=HOUR) == 300
    assert killed_work_s("hyperpod", JobOnNode(1500, None), fault_type=REBOOT, drain_timeout_s=HOUR) == 1500
    # still restarting from its checkpoint: nothing run since
    assert killed_work_s("hyperpod", JobOnNode(-120, 600), fault_type=REBOOT, drain_timeout_s=HOUR) == 0


def test_a_drained_job_that_ends_within_the_timeout_loses_nothing() -> None:
    ending = JobOnNode(1500, None, remaining_s=HOUR - 1)
    assert killed_work_s("autopilot", ending, fault_type=REBOOT, drain_timeout_s=HOUR) == 0
    assert killed_work_s("hyperpod", ending, fault_type=REBOOT, drain_timeout_s=HOUR) == 1500


def test_a_drained_job_still_running_is_requeued_at_the_timeout_from_its_checkpoint() -> None:
    # 1500 s in, requeued 1000 s later: 2500 s = 4 checkpoints of 600 s + 100 s lost
    assert killed_work_s("autopilot", JobOnNode(1500, 600), fault_type=REBOOT, drain_timeout_s=1000) == 100
    # a timeout that is a multiple of the interval finds it as far past a checkpoint as a reboot at once
    assert killed_work_s("autopilot", JobOnNode(1500, 600), fault_type=REBOOT, drain_timeout_s=HOUR) == 300
    # one that never checkpoints loses its whole run, the drain's hour included
    long = JobOnNode(1500, None, remaining_s=2 * HOUR)
    assert killed_work_s("autopilot", long, fault_type=REBOOT, drain_timeout_s=HOUR) == 1500 + HOUR
    # a restart that ends during the drain runs until the requeue
    assert killed_work_s("autopilot", JobOnNode(-200, 600), fault_type=REBOOT, drain_timeout_s=1000) == 200


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        killed_work_s("manual", JobOnNode(1, 1), fault_type=REBOOT, drain_timeout_s=1)


def test_the_simulation_counts_reboot_faults_on_the_running_job_by_its_policy() -> None:
    """The fleet driver's accounting on its own job model: only faults that leave the GPUs, on a node
    of the job while it runs; HyperPod's figure is the work the job model itself loses there."""
    settings = JobSettings(nodes=2, checkpoint_s=600, restart_s=300)
    simulation = FleetSimulation(SimulationOptions(drain_timeout_minutes=1000 / 60))
    runs = {policy: JobRun(0, 2, TrainingJob(settings, [0, 1], 0.0)) for policy in ("hyperpod", "autopilot")}

    def fault(at_s: float, fault_type: str) -> Failure:
        return Failure(at_s, 0, "test", fault_type, reboot_heals=True)

    for policy, job_run in runs.items():
        simulation._count_repair_kill(policy, job_run, fault(1500, REBOOT), 1500)
        job_run.job.interrupt(1500)
        simulation._count_repair_kill(policy, job_run, fault(1600, REBOOT), 1600)  # waiting: nothing runs
        job_run.job.try_restart(1700, {0, 1})
        simulation._count_repair_kill(policy, job_run, fault(2900, REPLACE), 2900)  # the fault's own kill

    hyperpod, autopilot = runs["hyperpod"], runs["autopilot"]
    assert (hyperpod.repair_kills, hyperpod.repair_killed_s) == (1, 300)
    assert hyperpod.repair_killed_s == hyperpod.job.lost_s  # the job model's loss at that fault
    assert (autopilot.repair_kills, autopilot.repair_killed_s) == (1, 100)  # (1500 + 1000) % 600
