"""Fakes at the agent's two boundaries: Slurm's commands (argv in, stdout out) and the HTTP round trip."""

from __future__ import annotations

import email.utils
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from autopilot_agent.client import ReportClient, Response
from autopilot_agent.config import Config
from autopilot_agent.credentials import CredentialSource
from autopilot_agent.loop import Agent
from autopilot_agent.slurm import Slurm, SlurmError

GRES = "gpu:8(S:0-1)"
OS = "OS=Linux 5.15.0-1045-aws #49~20.04.1-Ubuntu SMP Wed Nov 1 2023 "


@dataclass
class FakeNode:
    state: str = "IDLE"
    reason: str = ""


@dataclass
class FakeJob:
    state: str
    nodes: list[str]
    requeue: bool = True  # sbatch --no-requeue: False


@dataclass
class FakeSlurmCommands:
    """A tiny Slurm answering the commands the agent runs, as 22.05 prints; any other argv fails the test."""

    nodes: dict[str, FakeNode] = field(default_factory=dict)
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    broken: str | None = None  # raise this RuntimeError on any call (an agent bug's stand-in)
    unavailable: int = 0  # the next this many calls fail as while slurmctld restarts

    def __call__(self, argv: Sequence[str]) -> str:
        argv = list(argv)
        self.calls.append(argv)
        if self.broken:
            raise RuntimeError(self.broken)
        if self.unavailable:
            self.unavailable -= 1
            raise SlurmError("slurm_load_node: Connection reset by peer")
        match argv:
            case ["sinfo", "-h", "-N", "-o", "%N"]:
                return "".join(f"{name}\n" for name in self.nodes)
            case ["scontrol", "show", "node", "-o", *names]:
                return "".join(self._node_line(name) for name in (names or self.nodes))
            case ["squeue", "-h", "-w", name, "-o", "%i|%T"]:
                return "".join(f"{j}|{job.state}\n" for j, job in self.jobs.items() if name in job.nodes)
            case ["squeue", "-h", "-o", "%i|%T|%N"]:
                return "".join(
                    f"{j}|{job.state}|{self._compress(job.nodes)}\n" for j, job in self.jobs.items()
                )
            case ["scontrol", "show", "hostnames", nodelist]:
                return "".join(f"{name}\n" for name in self._expand(nodelist))
            case ["scontrol", "update", node, "State=DRAIN", reason] if reason.startswith("Reason="):
                self.nodes[node.removeprefix("NodeName=")] = FakeNode(
                    self.nodes[node.removeprefix("NodeName=")].state.split("+")[0] + "+DRAIN", reason[7:]
                )
                return ""
            case ["scontrol", "update", node, "State=RESUME"]:
                # as 22.05 does: not responding until slurmctld's next ping of the node
                self.nodes[node.removeprefix("NodeName=")] = FakeNode("IDLE+NOT_RESPONDING")
                return ""
            case ["scontrol", "requeue", job_id]:
                job = self.jobs[job_id]
                if not job.requeue:
                    raise SlurmError(f"Requested operation is presently disabled for job {job_id}")
                self.jobs[job_id] = FakeJob("PENDING", [])
                return ""
        raise AssertionError(f"the agent ran an unexpected command: {argv}")

    def actions(self) -> list[list[str]]:
        """The calls that change Slurm."""
        return [c for c in self.calls if c[:2] in (["scontrol", "update"], ["scontrol", "requeue"])]

    def _node_line(self, name: str) -> str:
        if name not in self.nodes:
            raise SlurmError(f"Node {name} not found")
        node = self.nodes[name]
        reason = f" Reason={node.reason} [root@2026-11-27T21:00:00]" if node.reason else ""
        return (
            f"NodeName={name} Arch=x86_64 CoresPerSocket=48 CPUAlloc=0 CPUTot=192 Gres={GRES} "
            f"NodeAddr={name} {OS}RealMemory=1 State={node.state} Partitions=dev{reason}\n"
        )

    @staticmethod
    def _compress(nodes: list[str]) -> str:
        if len(nodes) < 2:
            return ",".join(nodes)
        prefix = nodes[0].rsplit("-", 1)[0]
        return f"{prefix}-[{','.join(n.rsplit('-', 1)[1] for n in nodes)}]"

    @staticmethod
    def _expand(nodelist: str) -> list[str]:
        prefix, _, rest = nodelist.partition("[")
        return [prefix + suffix for suffix in rest.rstrip("]").split(",")]


@dataclass
class FakeApi:
    """The control plane's side of POST /agent/{name}/reports: records each report, answers ``commands``."""

    now: datetime = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
    commands: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    requests: list[Mapping[str, str]] = field(default_factory=list)
    failures: list[Response | OSError] = field(default_factory=list)  # answered first, in order
    poll_seconds: float = 10
    keep_done: bool = False  # keep listing a command after its result (a control plane that lags)

    def __call__(self, url: str, headers: Mapping[str, str], body: bytes) -> Response:
        self.requests.append(headers)
        date = {"date": email.utils.format_datetime(self.now, usegmt=True)}
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, OSError):
                raise failure
            return failure._replace(headers={**date, **failure.headers})
        report = json.loads(body)
        self.reports.append(report)
        done = {result["commandId"] for result in report["results"]}
        if not self.keep_done:
            self.commands = [
                c for c in self.commands if not isinstance(c, dict) or c["commandId"] not in done
            ]
        answer = {"commands": self.commands, "pollSeconds": self.poll_seconds}
        return Response(200, date, json.dumps(answer).encode())

    def command(self, verb: str, node: str, command_id: str, minutes: float = 60, **extra: Any) -> None:
        deadline = (self.now + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        self.commands.append(
            {"commandId": command_id, "verb": verb, "node": node, "deadline": deadline, **extra}
        )

    def results(self) -> dict[str, dict[str, Any]]:
        return {r["commandId"]: r for report in self.reports for r in report["results"]}


CONFIG = Config("https://a1b2c3.execute-api.us-west-2.amazonaws.com/Prod", "us-west-2", "ml-cluster", 10.0)
KEYS = {"AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}


def make_client(api: FakeApi, sleeps: list[float] | None = None, **kwargs: Any) -> ReportClient:
    return ReportClient(
        CONFIG,
        CredentialSource(environ=KEYS),
        api,
        now=lambda: api.now,
        monotonic=lambda: 0.0,
        sleep=(sleeps if sleeps is not None else []).append,
        jitter=lambda: 1.0,
        **kwargs,
    )


def make_agent(api: FakeApi, slurm: FakeSlurmCommands, poll_seconds: float | None = None) -> Agent:
    return Agent(make_client(api), Slurm(slurm), poll_seconds)
