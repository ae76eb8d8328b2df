"""The agent's verbs against real Slurm (Debian's 22.05; sandbox/services/slurm's slurmctld and two slurmd),
the agent's own Slurm code running the real scontrol / squeue / sinfo, and the HTTP round trip faked (the
control plane's side is tested elsewhere). Skips with one line when Slurm is not installed; fails in CI."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from autopilot_agent.loop import Agent
from autopilot_agent.slurm import Slurm

from sandbox.services.slurm import SlurmCluster
from tests.unit.agent_fakes import FakeApi, make_client

# slow tier: real Slurm daemons (an external tool, tests/README.md), their timeouts on wall time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

NODES = ("ip-10-1-2-3", "ip-10-1-2-4")
GPUS = 8


@pytest.fixture(scope="module")
def slurm_conf() -> Iterator[str]:
    """A two-node Slurm cluster (sandbox/services/slurm), up: its slurm.conf, also in SLURM_CONF meanwhile
    (the agent's Slurm commands find their cluster as on a node, through the environment)."""
    # slurmstepd's Unix sockets live under the spool directory: pytest's tmp_path is too long for them
    cluster = SlurmCluster("agent-test", Path(tempfile.mkdtemp(prefix="slurm-agent-"))).start()
    try:
        cluster.add_nodes(dict.fromkeys(NODES, GPUS))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(cluster.conf))
            wait_until(lambda: sinfo_states() == dict.fromkeys(NODES, "idle"), "both nodes idle")
            yield str(cluster.conf)
    finally:
        cluster.stop()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def sinfo_states() -> dict[str, str]:
    try:
        out = run("sinfo", "-h", "-N", "-o", "%N %t")
    except subprocess.CalledProcessError:
        return {}
    return dict(line.split() for line in out.splitlines())


def job_state(job: str) -> str:
    return run("squeue", "-h", "-j", job, "-o", "%T").strip()


@pytest.fixture
def api() -> FakeApi:
    return FakeApi(now=datetime.now(UTC))


@pytest.fixture
def agent(slurm_conf: str, api: FakeApi) -> Agent:
    return Agent(make_client(api), Slurm(), poll_seconds=10.0)


def settle(agent: Agent, api: FakeApi, *command_ids: str) -> None:
    """Rounds (as the agent's loop would, faster) until these commands' results are delivered."""

    def delivered() -> bool:
        agent.poll_once()
        return set(command_ids) <= set(api.results())

    wait_until(delivered, f"results of {command_ids}", timeout=20)


def result(api: FakeApi, command_id: str) -> dict[str, Any]:
    return api.results()[command_id]


def test_the_report_is_slurms_own_view(agent: Agent, api: FakeApi) -> None:
    agent.poll_once()

    assert api.reports[0]["nodes"] == [
        {"name": name, "state": "IDLE", "reason": "", "gpus": GPUS, "jobs": []} for name in NODES
    ]


def test_drain_requeue_and_resume_on_real_slurm(agent: Agent, api: FakeApi, tmp_path: Path) -> None:
    node, other = NODES
    job = run(
        "sbatch", "--parsable", "-w", node, "-D", str(tmp_path), "-o", "/dev/null", "--wrap", "sleep 300"
    ).strip()
    try:
        wait_until(lambda: job_state(job) == "RUNNING", "the job running")

        # drain, with the operation in the reason: the job keeps running, nothing new lands there
        api.command("drain", node, "c-drain", reason="autopilot op-123: replace")
        api.command("await_idle", node, "c-idle")
        settle(agent, api, "c-drain")
        drained = result(api, "c-drain")
        assert drained["ok"] is True
        assert drained["detail"]["node"]["state"] in ("ALLOCATED+DRAIN", "MIXED+DRAIN")
        assert drained["detail"]["node"]["reason"] == "autopilot op-123: replace"
        assert drained["detail"]["node"]["jobs"] == [job]
        assert sinfo_states()[node] in ("drng", "drain")  # draining: a job still runs there
        assert "c-idle" not in api.results()  # held open while the job runs
        agent.poll_once()
        assert "c-idle" not in api.results()
        assert next(n for n in api.reports[-1]["nodes"] if n["name"] == node)["jobs"] == [job]

        # requeue: the job goes back to the queue (pinned to the drained node, it stays PENDING)
        api.command("requeue", node, "c-requeue")
        settle(agent, api, "c-requeue")
        requeued = result(api, "c-requeue")
        assert (requeued["ok"], requeued["detail"]["requeued"], requeued["detail"]["notRequeued"]) == (
            True,
            [job],
            [],
        )
        wait_until(lambda: job_state(job) == "PENDING", "the job pending again")

        # the node has no running job: await_idle completes
        settle(agent, api, "c-idle")
        assert result(api, "c-idle")["ok"] is True
        assert result(api, "c-idle")["detail"]["node"]["jobs"] == []
    finally:
        run("scancel", job)  # the test's own cleanup: the agent never cancels

    # resume: the node is schedulable again, idle
    api.command("resume", node, "c-resume")
    settle(agent, api, "c-resume")
    assert result(api, "c-resume")["ok"] is True
    assert result(api, "c-resume")["detail"]["node"]["state"] == "IDLE"
    assert sinfo_states() == {node: "idle", other: "idle"}


def test_resume_brings_a_down_node_back(agent: Agent, api: FakeApi) -> None:
    node = NODES[1]
    run("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=Node unexpectedly rebooted")
    assert sinfo_states()[node] == "down"

    api.command("resume", node, "c1")
    settle(agent, api, "c1")

    assert result(api, "c1")["detail"]["node"] == {
        "name": node,
        "state": "IDLE",
        "reason": "",
        "gpus": GPUS,
        "jobs": [],
    }
    assert sinfo_states()[node] == "idle"


def test_a_name_outside_slurms_list_never_reaches_scontrol(agent: Agent, api: FakeApi) -> None:
    api.command("drain", "ip-10-1-2-3;scontrol shutdown", "c1", reason="x")
    api.command("drain", "ip-10-1-2-[3-4]", "c2", reason="x")
    settle(agent, api, "c1", "c2")

    assert {k: r["error"] for k, r in api.results().items()} == {"c1": "unknown node", "c2": "unknown node"}
    assert sinfo_states() == {n: "idle" for n in NODES}
