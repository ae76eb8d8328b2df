"""The sweep's reading of Slurm (autopilot.logic.healing.slurm_signal) against real Slurm: node views as
the agent reports them (agent/autopilot_agent/slurm.py) after a reboot, a dead slurmd and drains, read
by the same predicates the sweep decides with. One cluster serves the module, in order."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from autopilot.logic.healing.slurm_signal import operator_drain, rebooted_down
from autopilot.models.agent import SlurmNode
from autopilot_agent.slurm import Slurm

from sandbox.services.slurm import SlurmCluster

# slow tier: real Slurm daemons (an external tool, tests/README.md), their timeouts on wall time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

A, B, C = "ip-10-3-0-11", "ip-10-3-0-12", "ip-10-3-0-13"


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    # slurmstepd's Unix sockets live under the spool directory: pytest's tmp_path is too long for them
    cluster = SlurmCluster("signal-test", Path(tempfile.mkdtemp(prefix="slurm-signal-")), slurmd_timeout=3)
    cluster.start()
    try:
        cluster.add_nodes({A: 8, B: 8, C: 8})
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(cluster.conf))  # the agent's commands find the cluster so
            cluster.wait_for("three idle nodes", lambda: all(view(n).state == "IDLE" for n in (A, B, C)))
            yield cluster
    finally:
        cluster.stop()


def view(name: str) -> SlurmNode:
    """The node as the agent reports it, as AgentFunction stores it."""
    return SlurmNode.model_validate(Slurm().node(name))


def test_a_rebooted_node_is_down_only_for_the_reboot(slurm: SlurmCluster) -> None:
    slurm.reboot_node(B)
    slurm.wait_for("B down", lambda: view(B).base_state == "DOWN")

    rebooted = view(B)
    assert rebooted_down(rebooted), rebooted
    assert not rebooted.not_responding

    def resumed() -> bool:
        # slurmd's registration can reach slurmctld after the resume (DOWN again): resume again, as the
        # agent's resume does (agent/autopilot_agent/loop.py, MAX_RESUMES)
        if rebooted_down(view(B)):
            slurm.run("scontrol", "update", f"NodeName={B}", "State=RESUME")
        return view(B).state == "IDLE"

    slurm.wait_for("B idle again", resumed)


def test_a_dead_slurmd_is_not_responding_and_not_a_reboot(slurm: SlurmCluster) -> None:
    slurm.stop_node(C)
    slurm.wait_for("C not responding", lambda: view(C).not_responding)

    silent = view(C)
    assert not rebooted_down(silent), silent
    assert not operator_drain(silent)


def test_an_operators_drain_is_told_from_autopilots(slurm: SlurmCluster) -> None:
    slurm.run("scontrol", "update", f"NodeName={A}", "State=DRAIN", "Reason=RMA 4711: bad HCA")
    assert operator_drain(view(A)), view(A)
    # a repair's drain (statemachines/replace_node.asl.json's reason) over it
    reason = "autopilot op-20261127210000-0a1b2c3d: reboot (SlurmNotResponding)"
    slurm.run("scontrol", "update", f"NodeName={A}", "State=DRAIN", f"Reason={reason}")
    drained = view(A)
    assert drained.reason == reason  # Slurm keeps one reason: the operator's is replaced
    assert not operator_drain(drained)
    assert not rebooted_down(drained)
