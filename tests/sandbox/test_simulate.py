"""The fleet simulation (sandbox.apps.simulate): its models, its hooks into the sandbox, and a small run.

The run is the real one, small: 4 job nodes, 0 or 2 spares, both policies, one simulated day, Llama 3's
failure rates x200 so a few faults happen. It goes through the deployed template (faults injected,
nothing else done by hand), so the checks that tie the report to what was injected would fail if the
driver skipped a fault, lost a node's successor, or advanced the clock past the control plane.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox.apps.simulate import __main__ as cli
from sandbox.apps.simulate.failures import CAUSES, REBOOT, failure_trace, job_rate_per_s, node_rate_per_s
from sandbox.apps.simulate.fleet import ClusterRun, Outcome, merge
from sandbox.apps.simulate.job import JobSettings, JobState, TrainingJob
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import clock as stepfunctions_clock
from sandbox.services.hyperpod import HyperPodSimulator

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

# seed 3: a reboot that heals, one that does not (escalated to a replace), a replace; the last at 17 h
NODES, SPARES, DAYS, SCALE, SEED = 4, (0, 2), 1.0, 200.0, 3


# ------------------------------------------------------------------ the models (unit)


def test_llama3_counts_add_up_to_the_419_unexpected_interruptions() -> None:
    assert sum(c.interruptions for c in CAUSES) == 419
    # 356 node faults over 2,048 nodes x 54 days: a node fails every ~310 days
    assert 300 < 1 / (node_rate_per_s() * 86400) < 320
    # the job-level causes of a 2,048-node job: 63 in 54 days
    assert job_rate_per_s(2048) * 54 * 86400 == pytest.approx(63)


def test_a_failure_trace_is_seeded_and_shared_by_smaller_spare_counts() -> None:
    trace = failure_trace(nodes=16, slots=24, seconds=86400 * 30, seed=3, rate_scale=10)
    assert trace == failure_trace(nodes=16, slots=24, seconds=86400 * 30, seed=3, rate_scale=10)
    assert trace != failure_trace(nodes=16, slots=24, seconds=86400 * 30, seed=4, rate_scale=10)
    assert [f.at_s for f in trace] == sorted(f.at_s for f in trace)
    assert all(f.slot is None or 0 <= f.slot < 24 for f in trace)
    assert {f.slot is None for f in trace} == {True, False}  # node faults and job failures


def test_an_interruption_loses_the_work_since_the_last_checkpoint() -> None:
    job = TrainingJob(JobSettings(nodes=2, checkpoint_s=600, restart_s=300), [0, 1], 0.0)

    assert job.interrupt(1500)  # 2 checkpoints (1200 s kept), 300 s lost
    assert (job.trained_s, job.lost_s, job.state) == (1200, 300, JobState.WAITING)
    assert not job.try_restart(1600, {0})  # one node serves, two needed
    assert job.try_restart(2000, {0, 1, 2})
    assert job.slots == {0, 1}  # its own nodes first
    assert job.interrupt(2900)  # running again from 2300: 600 s, one checkpoint, nothing lost
    assert (job.trained_s, job.lost_s, job.interruptions) == (1800, 300, 2)


def test_a_waiting_job_is_not_interrupted_again_and_restarts_on_a_spare() -> None:
    job = TrainingJob(JobSettings(nodes=2, checkpoint_s=600, restart_s=300), [0, 1], 0.0)
    job.interrupt(100)
    assert not job.interrupt(200)  # already down: a second fault costs no more
    assert job.try_restart(300, {1, 2})
    assert job.slots == {1, 2}
    job.finish(3600)
    assert job.trained_s == 3600 - 600  # 100 s lost, then down from 100 s to 600 s (restart done)
    assert job.ettr(3600) == pytest.approx(3000 / 3600)


def test_outcomes_of_processes_merge_into_one() -> None:
    def outcome(policy: str, wall_s: float, invocations: float) -> Outcome:
        return Outcome(
            runs=[ClusterRun(policy, f"sim-{policy}", [])],
            end_s=86400.0,
            wall_s=wall_s,
            steps=10,
            lambda_metrics={"ClusterEventsFunction": {"invocations": invocations, "duration_ms": 100.0}},
            lambda_memory_mb={"ClusterEventsFunction": 512},
        )

    merged = merge([outcome("hyperpod", 200.0, 3.0), outcome("autopilot", 250.0, 5.0)])
    assert [run.policy for run in merged.runs] == ["hyperpod", "autopilot"]
    assert (merged.end_s, merged.wall_s, merged.steps) == (86400.0, 250.0, 20)  # side by side: the longest
    assert merged.lambda_metrics == {"ClusterEventsFunction": {"invocations": 8.0, "duration_ms": 200.0}}


# ------------------------------------------------------------------ the hooks


def test_the_simulator_tells_its_next_due_step_and_a_nodes_state() -> None:
    clock = SandboxClock(speed=0)
    with HyperPodSimulator(clock, seed=1) as simulator:
        assert simulator.next_due() is None
        simulator.call(
            "CreateCluster",
            {
                "ClusterName": "c",
                "InstanceGroups": [
                    {
                        "InstanceGroupName": "workers",
                        "InstanceType": "ml.p5.48xlarge",
                        "InstanceCount": 1,
                        "LifeCycleConfig": {"SourceS3Uri": "s3://b/p", "OnCreate": "on_create.sh"},
                        "ExecutionRole": "arn:aws:iam::123456789012:role/r",
                    }
                ],
            },
        )
        due = simulator.next_due()
        assert due is not None
        assert (due - clock.now()).total_seconds() == pytest.approx(2)  # the Creating event's delivery
        clock.advance(simulator.timings.create_cluster)
        simulator.tick()
        [node] = simulator.call("ListClusterNodes", {"ClusterName": "c"})["ClusterNodeSummaries"]
        state = simulator.node_state("c", node["InstanceId"])
        assert state is not None
        assert state.serves
        simulator.apply_fault("node_unhealthy", {"cluster": "c", "node_id": node["InstanceId"]})
        assert not simulator.node_state("c", node["InstanceId"]).serves  # type: ignore[union-attr]
        simulator.call("BatchReplaceClusterNodes", {"ClusterName": "c", "NodeIds": [node["InstanceId"]]})
        replaced = simulator.node_state("c", node["InstanceId"])
        assert replaced is not None
        assert replaced.replaced_by
        assert simulator.node_repairs[("c", node["InstanceId"], "replace")] == 1
        assert simulator.node_state("c", "i-nonexistent") is None


def test_next_deadline_is_the_earliest_timer_an_execution_thread_waits_on() -> None:
    clock = SandboxClock(speed=0)
    undo = stepfunctions_clock.install(clock)
    try:
        assert stepfunctions_clock.next_deadline() is None
        sleepers = [threading.Thread(target=stepfunctions_clock.sleep_simulated, args=(s,)) for s in (90, 30)]
        for sleeper in sleepers:
            sleeper.start()
        deadline = time.monotonic() + 10
        while stepfunctions_clock.next_deadline() != 30 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert stepfunctions_clock.next_deadline() == 30
        clock.advance(30)
        sleepers[1].join(10)
        assert stepfunctions_clock.next_deadline() == 90
        clock.advance(60)
        sleepers[0].join(10)
        assert stepfunctions_clock.next_deadline() is None
    finally:
        undo()


# ------------------------------------------------------------------ a small run (the sandbox)


# the small run is two processes, each a whole sandbox on a running clock: the slow tier
SANDBOX_RUN = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sim") / "fleet-sim.json"
    code = cli.main(
        [
            f"--nodes={NODES}",
            f"--days={DAYS}",
            "--spares=" + ",".join(map(str, SPARES)),
            f"--rate-scale={SCALE}",
            f"--seed={SEED}",
            "--max-unhealthy-percent=50",
            "--processes=2",  # one process and sandbox per policy, merged (the default on 2 cores)
            f"--report={out}",
            f"--log={out.with_suffix('.log')}",
        ]
    )
    assert code == 0
    written: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return {**written, "path": out}


def entry(report: dict[str, Any], policy: str, spares: int) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        e for e in report["entries"] if e["policy"] == policy and e["spares"] == spares
    ]
    assert len(found) == 1
    return found[0]


@SANDBOX_RUN
def test_the_report_has_one_entry_per_policy_and_spare_count_and_a_chart(report: dict[str, Any]) -> None:
    assert {(e["policy"], e["spares"]) for e in report["entries"]} == {
        (p, k) for p in ("hyperpod", "autopilot") for k in SPARES
    }
    assert Path(report["path"]).with_suffix(".png").stat().st_size > 1000
    for e in report["entries"]:
        assert 0 < e["ettr"] <= 1
        assert e["lost_gpu_hours"] >= 0
        # a repair kills the job only at a fault that interrupted it (repair_kills.py)
        assert 0 <= e["repair_kills"] <= e["interruptions"]
        if e["policy"] == "hyperpod":  # no drain: the kill is the job model's own loss at the fault
            assert e["repair_killed_gpu_hours"] <= e["lost_work_gpu_hours"]
        assert e["control_plane_cost_usd"] > 0
        assert (e["spare_cost_usd"] > 0) == (e["spares"] > 0)


@SANDBOX_RUN
def test_every_injected_fault_is_accounted_for_and_repaired_by_the_control_plane(
    report: dict[str, Any],
) -> None:
    trace = failure_trace(
        nodes=NODES, slots=NODES + max(SPARES), seconds=DAYS * 86400, seed=SEED, rate_scale=SCALE
    )
    for e in report["entries"]:
        mine = [f for f in trace if f.slot is None or f.slot < NODES + e["spares"]]
        assert e["node_faults"] + e["faults_on_down_nodes"] + e["job_faults"] == len(mine)
        assert e["node_faults"] > 0
        # an interruption is a fault of the job or of one of its nodes while it was up
        assert 0 < e["interruptions"] <= e["node_faults"] + e["job_faults"]
        # one ReplaceNode execution per fault (no duplicate events), and a repair for each fault:
        # the ones needing new hardware (or whose reboot did not heal) got one replacement each
        assert e["repair_executions"] == e["node_faults"]
        assert e["replacements"] == e["replace_faults"]
        assert e["reboots"] + e["replacements"] >= e["node_faults"]
    # both policies saw the same faults
    for spares in SPARES:
        hyperpod, autopilot = entry(report, "hyperpod", spares), entry(report, "autopilot", spares)
        assert hyperpod["node_faults"] == autopilot["node_faults"]
        assert hyperpod["replace_faults"] == autopilot["replace_faults"]


@SANDBOX_RUN
def test_spares_do_not_lower_ettr_for_the_same_faults(report: dict[str, Any]) -> None:
    for policy in ("hyperpod", "autopilot"):
        ettrs = [entry(report, policy, k)["ettr"] for k in SPARES]
        assert ettrs == sorted(ettrs), (policy, ettrs)


@SANDBOX_RUN
def test_reboot_faults_are_rebooted_first(report: dict[str, Any]) -> None:
    trace = failure_trace(
        nodes=NODES, slots=NODES + max(SPARES), seconds=DAYS * 86400, seed=SEED, rate_scale=SCALE
    )
    reboot_faults = [f for f in trace if f.fault_type == REBOOT and f.slot is not None and f.slot < NODES]
    for policy in ("hyperpod", "autopilot"):
        assert entry(report, policy, 0)["reboots"] == len(reboot_faults) > 0
