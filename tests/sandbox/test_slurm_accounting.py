"""Chargeback's finished jobs end to end on this machine: real Slurm recording them (the job completion
log, or slurmdbd with its MariaDB: sandbox/services/slurm/accounting.py), the real agent installed on a
"node" and run as its systemd unit would (sandbox/services/slurm/agent.py), reporting over HTTP to a recording
endpoint
that validates every report as AgentFunction parses it (the control plane's ingestion is tested elsewhere).
Jobs under two accounts and two users are reported once each, with Slurm's own nodes, GPUs and times,
across an agent restart. And the agent's own node-list expansion against Slurm's scontrol."""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from autopilot.models.agent import AgentReport
from autopilot_agent.jobs import expand_hostlist

from sandbox.services.slurm import SlurmCluster
from sandbox.services.slurm.agent import agent_files, install_agent_files, start_agent, stop_agent
from sandbox.services.slurm.cluster import Accounting

# slow tier: real Slurm daemons, slurmdbd and MariaDB, and the agent as a process (tests/README.md)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

A, B = "ip-10-1-3-21", "ip-10-1-3-22"
GPUS = 4
CLUSTER = "chargeback"


class ReportSink:
    """POST /agent/<cluster>/reports: each body validated as AgentFunction does (AgentReport), kept."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.errors: list[str] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                try:
                    assert self.path == f"/Prod/agent/{CLUSTER}/reports", self.path
                    report = json.loads(body)
                    AgentReport.model_validate(report)
                except Exception as error:  # noqa: BLE001 - the test reports it
                    sink.errors.append(repr(error))
                    self._answer(400, {"message": str(error)[:200]})
                    return
                sink.reports.append(report)
                self._answer(200, {"commands": [], "pollSeconds": 0.5})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Date", formatdate(usegmt=True))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/Prod"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jobs(self) -> list[dict[str, Any]]:
        return [job for report in self.reports for job in report.get("jobs", [])]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(params=["jobcomp", "slurmdbd"])
def cluster(request: pytest.FixtureRequest) -> Iterator[SlurmCluster]:
    accounting: Accounting = request.param
    slurm = SlurmCluster(CLUSTER, Path(tempfile.mkdtemp(prefix="slurm-acct-")), accounting=accounting).start()
    try:
        slurm.add_nodes({A: GPUS, B: GPUS})
        slurm.add_accounts({"physics": ["root"], "biology": ["root", "nobody"]})
        slurm.wait_for(
            "both nodes idle", lambda: slurm.run("sinfo", "-h", "-N", "-o", "%t").split() == ["idle"] * 2
        )
        yield slurm
    finally:
        slurm.stop()


@pytest.fixture
def sink() -> Iterator[ReportSink]:
    endpoint = ReportSink()
    yield endpoint
    endpoint.close()


def node_with_agent(cluster: SlurmCluster) -> Path:
    """A controller "node" with the agent installed by its install.sh (as the lifecycle scripts do)."""
    root = cluster.workdir / "node"
    config = {"apiUrl": "https://example.invalid/Prod", "region": "us-west-2", "clusterName": CLUSTER}
    assert install_agent_files(root, agent_files(config), resource_config={}), (
        root / "lifecycle.log"
    ).read_text()
    return root


def run_agent(cluster: SlurmCluster, root: Path, sink: ReportSink) -> subprocess.Popen[bytes]:
    keys = {
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "token",
    }
    return start_agent(root, api_url=sink.url, slurm_conf=cluster.conf, credentials=keys)


def wait_until(check: Callable[[], bool], what: str, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}; the agent's log ends:\n{tail}")
        time.sleep(0.2)


def slurm_cpus(cluster: SlurmCluster, job: str) -> int:
    """The CPUs slurmctld allocated the job (NumCPUs)."""
    fields = dict(
        word.split("=", 1)
        for word in cluster.run("scontrol", "show", "job", "-o", job).split()
        if "=" in word
    )
    return int(fields["NumCPUs"])


def slurm_times(cluster: SlurmCluster, job: str) -> tuple[str, str]:
    """The job's StartTime / EndTime as slurmctld shows them (local time: this machine's), in UTC."""
    fields = dict(
        word.split("=", 1)
        for word in cluster.run("scontrol", "show", "job", "-o", job).split()
        if "=" in word
    )
    return tuple(  # type: ignore[return-value]
        datetime.strptime(fields[key], "%Y-%m-%dT%H:%M:%S").astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for key in ("StartTime", "EndTime")
    )


def test_jobs_under_two_accounts_are_reported_once_with_slurms_own_facts(
    cluster: SlurmCluster, sink: ReportSink
) -> None:
    root = node_with_agent(cluster)
    log = root / "agent.log"
    agent = run_agent(cluster, root, sink)
    try:
        physics = cluster.submit("physics", nodes=[A, B], gpus_per_node=2, seconds=1)
        biology = cluster.submit("biology", user="nobody", nodes=[B], gpus_per_node=1, seconds=1)
        never_ran = cluster.run(
            "sbatch", "--parsable", "-A", "biology", "-o", "/dev/null", "--begin=now+1hour", "--wrap", "true"
        ).strip()  # fmt: skip
        cluster.run("scancel", never_ran)
        cluster.wait_finished([physics, biology])
        wait_until(
            lambda: {physics, biology} <= {job["jobId"] for job in sink.jobs()}, "both jobs reported", log
        )
        reported = {job["jobId"]: job for job in sink.jobs()}

        start, end = slurm_times(cluster, physics)
        assert reported[physics] == {
            "jobId": physics,
            "account": "physics",
            "user": "root",
            "partition": "dev",
            "nodes": [A, B],
            "gpus": 4,
            "cpus": slurm_cpus(cluster, physics),  # AllocTRES cpu / the log's ProcCnt
            "start": start,
            "end": end,
            "state": "COMPLETED",
        }
        start, end = slurm_times(cluster, biology)
        assert {
            k: reported[biology][k]
            for k in ("account", "user", "nodes", "gpus", "cpus", "start", "end", "state")
        } == {
            "account": "biology",
            "user": "nobody",
            "nodes": [B],
            "gpus": 1,
            "cpus": slurm_cpus(cluster, biology),
            "start": start,
            "end": end,
            "state": "COMPLETED",
        }
        assert never_ran not in reported  # cancelled while pending: it never ran

        # the agent restarts (systemd's Restart=always, a reboot): its cursor, in its state directory,
        # keeps what the control plane already has from being sent again
        stop_agent(agent)
        later = cluster.run_job("biology", nodes=[A], seconds=0.5)
        agent = run_agent(cluster, root, sink)
        wait_until(lambda: later in {job["jobId"] for job in sink.jobs()}, "the later job reported", log)
        polls = len(sink.reports)
        wait_until(lambda: len(sink.reports) >= polls + 8, "a few more reports (the jobs read again)", log)
    finally:
        stop_agent(agent)

    sent = [job["jobId"] for job in sink.jobs()]
    assert sorted(sent) == sorted([physics, biology, later])  # each once
    assert sink.errors == []
    assert (root / "var" / "lib" / "autopilot-agent" / "finished-jobs.json").is_file()


@pytest.mark.parametrize(
    ("nodelist", "expanded_by_the_agent"),
    [
        ("ip-10-1-0-[08-10,15],gpu7", True),
        ("ip-10-1-3-[21-22]", True),
        ("n[1-3],m[5-6]", True),
        ("x[9-11]", True),
        ("gpu[1-2]x[1-2]", False),  # two bracket groups: handed to scontrol
    ],
)
def test_the_agents_host_list_expansion_is_slurms(
    nodelist: str, expanded_by_the_agent: bool, tmp_path: Path
) -> None:
    """The agent expands node lists itself (a report holds up to 2,000 jobs): as `scontrol show hostnames`
    does, or not at all (None), and then scontrol does."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\n")  # scontrol needs no daemon for this
    slurms = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist],
        env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()

    assert expand_hostlist(nodelist) == (slurms if expanded_by_the_agent else None)
