"""Real Slurm on this machine (sandbox/services/slurm/cluster.py): the daemons, jobs, a crashed node, a
reboot, a replacement, and nothing left running after stop. One cluster serves the module, in order."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.services.slurm import SlurmCluster, SlurmError
from sandbox.services.slurm.processes import processes_using

# slow tier: real Slurm daemons (an external tool, tests/README.md), their timeouts on wall time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

A, B, C, D, E = "ip-10-1-0-11", "ip-10-1-0-12", "ip-10-1-0-13", "ip-10-1-7-14", "ip-10-1-7-15"


def short_workdir() -> Path:
    # slurmstepd's Unix sockets live under the spool directory: pytest's tmp_path is too long for them
    return Path(tempfile.mkdtemp(prefix="slurm-test-"))


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    cluster = SlurmCluster("slurm-test", short_workdir(), slurmd_timeout=3).start()
    try:
        cluster.add_nodes({A: 8, B: 8, C: 4})
        yield cluster
    finally:
        cluster.stop()


def states(cluster: SlurmCluster) -> dict[str, str]:
    """sinfo's node list: name → long state (idle, allocated, down*, ...)."""
    lines = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").split("\n")
    return dict(line.split() for line in lines if line.strip())


def job_state(cluster: SlurmCluster, job: str) -> str:
    return cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip()


def test_the_daemons_come_up_with_each_nodes_gpus(slurm: SlurmCluster) -> None:
    slurm.wait_for("three idle nodes", lambda: states(slurm) == {A: "idle", B: "idle", C: "idle"})
    assert slurm.node_state(A)["Gres"] == "gpu:8"
    assert slurm.node_state(C)["Gres"] == "gpu:4"
    assert slurm.node_state(A)["Port"] != slurm.node_state(B)["Port"]  # one slurmd each


def test_a_job_runs_on_two_nodes_with_their_gpus(slurm: SlurmCluster) -> None:
    out = slurm.workdir / "job.out"
    job = slurm.run(
        "sbatch", "--parsable", "-N2", "-w", f"{A},{B}", "--gres=gpu:8", "-o", str(out),
        "--wrap", "srun hostname; sleep 300",
    ).strip()  # fmt: skip
    slurm.wait_for("the job running", lambda: job_state(slurm, job) == "RUNNING")
    assert slurm.run("squeue", "-h", "-j", job, "-o", "%N").strip() == "ip-10-1-0-[11-12]"
    slurm.wait_for("both tasks' output", lambda: out.exists() and len(out.read_text().split()) == 2)
    slurm.run("scancel", job)


def test_a_stopped_slurmd_makes_its_node_down_and_not_responding(slurm: SlurmCluster) -> None:
    slurm.stop_node(C)
    slurm.wait_for("DOWN*", lambda: states(slurm)[C] == "down*", timeout=30)
    assert slurm.node_state(C)["State"] == "DOWN+NOT_RESPONDING"


def test_a_reboot_leaves_the_node_down_as_unexpectedly_rebooted(slurm: SlurmCluster) -> None:
    slurm.wait_for("B idle", lambda: states(slurm)[B] == "idle")
    slurm.reboot_node(B)
    slurm.wait_for("B down", lambda: states(slurm)[B] == "down")
    assert slurm.node_state(B)["Reason"] == "Node unexpectedly rebooted"  # slurmctld's own words
    slurm.run("scontrol", "update", f"NodeName={B}", "State=RESUME")
    slurm.wait_for("B idle again", lambda: states(slurm)[B] == "idle")


def test_a_reboot_across_a_controller_restart_is_still_down_as_rebooted(slurm: SlurmCluster) -> None:
    # the restart (a node joining) happens while B's slurmd is down: slurmctld forgets B's last answer,
    # and its own reboot check skips a node it shows UNKNOWN
    slurm.stop_node(B)
    slurm.add_nodes({E: 0})
    slurm.start_node(B, rebooted=True)
    assert states(slurm)[B] == "down"
    assert slurm.node_state(B)["Reason"] == "Node unexpectedly rebooted"
    slurm.run("scontrol", "update", f"NodeName={B}", "State=RESUME")
    slurm.wait_for("B idle again", lambda: states(slurm)[B] == "idle")


def test_a_replacement_joins_under_its_own_name_and_the_old_name_is_gone(slurm: SlurmCluster) -> None:
    job = slurm.run("sbatch", "--parsable", "-w", B, "-o", "/dev/null", "--wrap", "sleep 300").strip()
    slurm.wait_for("the job on B running", lambda: job_state(slurm, job) == "RUNNING")
    slurm.run("scontrol", "update", f"NodeName={B}", "State=DRAIN", "Reason=kept across restarts")
    slurm.add_nodes({D: 8})
    slurm.remove_nodes([A])
    slurm.wait_for("D idle", lambda: states(slurm).get(D) == "idle")
    assert A not in states(slurm)
    assert slurm.node_state(A) == {}
    # the controller restarts that took A out and put D in kept what it knew of the others: B's
    # drain and its reason, and the job running there
    assert slurm.node_state(B)["Reason"] == "kept across restarts"
    assert job_state(slurm, job) == "RUNNING"
    assert states(slurm)[B] == "draining"
    slurm.run("scancel", job)


def test_stop_leaves_no_daemon_job_or_file_behind() -> None:
    cluster = SlurmCluster("slurm-stop", short_workdir(), slurmd_timeout=3).start()
    cluster.add_nodes({A: 1})
    job = cluster.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300").strip()
    cluster.wait_for("the job running", lambda: job_state(cluster, job) == "RUNNING")
    # RUNNING is reported before slurmstepd has started the job's shell and sleep: wait for them too
    # (slurmctld (+ slurmscriptd), slurmd, slurmstepd, the job's shell and sleep)
    cluster.wait_for("the job's processes", lambda: len(processes_using(str(cluster.workdir))) >= 4)
    ours = processes_using(str(cluster.workdir))
    cluster.stop()
    assert not processes_using(str(cluster.workdir))
    assert not any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in ours)
    assert not cluster.workdir.exists()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_work_directory_too_long_for_slurms_sockets_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(SlurmError, match="too long for Slurm's sockets"):
        SlurmCluster("long", tmp_path / ("x" * 40)).start()


def test_a_controller_that_cannot_start_says_why_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:  # its port is in use: slurmctld cannot listen
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        monkeypatch.setattr("sandbox.services.slurm.cluster._free_port", lambda host: taken.getsockname()[1])
        cluster = SlurmCluster("busy", short_workdir())
        with pytest.raises(SlurmError, match="Address already in use"):
            cluster.start()
    assert not cluster.running
    assert not processes_using(str(cluster.workdir))
    assert not cluster.workdir.exists()
