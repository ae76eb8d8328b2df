"""What the agent reads from and does to Slurm, through its own commands (scontrol, squeue, sinfo).

Every call is an argv list (never a shell), on a node name first checked against Slurm's own node list.
The node view sent to the control plane: {"name", "state" (Slurm's State= text, e.g. "IDLE+DRAIN"),
"reason" ("" when none), "gpus" (the configured gpu GRES count), "jobs" (ids of the jobs on the node in
any state but PENDING)}. Slurm 22.05's scontrol has no --json: the one-line (-o) form is parsed.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Callable, Dict, List, Sequence

TIMEOUT_SECONDS = 30.0
# a Slurm node name as HyperPod's are (ip-10-1-2-3) and as Slurm accepts them; anything else is refused
# before Slurm's list is even asked (no shell metacharacters, spaces, brackets or commas: one node)
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
# what the control plane accepts in one node view (autopilot.models.agent): past these a report is refused
MAX_STATE, MAX_REASON, MAX_JOBS = 200, 1000, 1000
_FIELD = re.compile(r"(?:^|\s)([A-Za-z_]+)=(\S*)")
# scontrol appends "[user@2026-11-27T21:00:00]" to a reason
_REASON_SUFFIX = re.compile(r"^(.*?)\s*\[[^\[\]@\s]+@[0-9T:-]+\]")
_GPUS = re.compile(r"(?:^|,)gpu(?::[^:,(]*)?:(\d+)")


class SlurmError(Exception):
    """A Slurm command failed; the message is its stderr (or why it could not run)."""


class UnknownNode(SlurmError):
    def __init__(self) -> None:
        super().__init__("unknown node")


def run_command(argv: Sequence[str]) -> str:
    """Run one Slurm command; its stdout. SlurmError with its stderr when it fails."""
    try:
        done = subprocess.run(
            list(argv),
            # Slurm's times as the agent parses them, whatever the node's profile sets
            env={**os.environ, "SLURM_TIME_FORMAT": "standard"},
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SlurmError(f"{argv[0]}: {error}") from None
    if done.returncode != 0:
        raise SlurmError((done.stderr or done.stdout).strip() or f"{argv[0]} exited {done.returncode}")
    return str(done.stdout)


class Slurm:
    """The four verbs and the node report. ``run`` is the process boundary (tests pass a fake)."""

    def __init__(self, run: Callable[[Sequence[str]], str] = run_command) -> None:
        self.run = run

    # reading ----------------------------------------------------------------------------------
    def node_names(self) -> List[str]:
        """Slurm's own node list (a node in two partitions is listed once)."""
        names = self.run(["sinfo", "-h", "-N", "-o", "%N"]).split()
        return list(dict.fromkeys(names))

    def check(self, name: str) -> None:
        """UnknownNode unless ``name`` is a plain node name in Slurm's list."""
        if not isinstance(name, str) or not NODE_NAME.match(name) or name not in self.node_names():
            raise UnknownNode()

    def nodes(self) -> List[Dict[str, Any]]:
        """Every node's view (two commands, plus one per multi-node job's node list)."""
        out = self.run(["scontrol", "show", "node", "-o"])
        views = [parse_node(line) for line in out.splitlines() if line.startswith("NodeName=")]
        # a name Autopilot cannot address (not a hostname label) would get the whole report refused
        views = [view for view in views if NODE_NAME.match(view["name"])]
        jobs = self._jobs_by_node()
        for view in views:
            view["jobs"] = jobs.get(view["name"], [])[:MAX_JOBS]
        return views

    def node(self, name: str) -> Dict[str, Any]:
        """One node's view (``name`` already checked)."""
        lines = [
            line
            for line in self.run(["scontrol", "show", "node", "-o", name]).splitlines()
            if line.startswith("NodeName=")
        ]
        if not lines:
            raise UnknownNode()
        view = parse_node(lines[0])
        view["jobs"] = self.jobs_on(name)[:MAX_JOBS]
        return view

    def jobs_on(self, name: str) -> List[str]:
        """Ids of the jobs on the node that are not PENDING (running, completing, suspended...)."""
        out = self.run(["squeue", "-h", "-w", name, "-o", "%i|%T"])
        return [job for job, state in _rows(out, 2) if state != "PENDING"]

    def _jobs_by_node(self) -> Dict[str, List[str]]:
        out = self.run(["squeue", "-h", "-o", "%i|%T|%N"])
        by_node: Dict[str, List[str]] = {}
        expanded: Dict[str, List[str]] = {}
        for job, state, nodelist in _rows(out, 3):
            if state == "PENDING" or not nodelist:
                continue
            if nodelist not in expanded:
                expanded[nodelist] = self._hostnames(nodelist)
            for name in expanded[nodelist]:
                by_node.setdefault(name, []).append(job)
        return by_node

    def _hostnames(self, nodelist: str) -> List[str]:
        # Slurm's compressed host lists (ip-10-1-2-[3-4],ip-10-1-5-6): Slurm expands its own syntax
        if "[" not in nodelist:
            return nodelist.split(",")
        return self.run(["scontrol", "show", "hostnames", nodelist]).split()

    # the verbs' actions (names already checked) -----------------------------------------------
    def drain(self, name: str, reason: str) -> None:
        self.run(["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"])

    def resume(self, name: str) -> None:
        self.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"])

    def requeue(self, job: str) -> None:
        self.run(["scontrol", "requeue", job])


def parse_node(line: str) -> Dict[str, Any]:
    """One line of ``scontrol show node -o`` -> the node view (jobs empty)."""
    head, _, reason = line.partition(" Reason=")
    fields = dict(_FIELD.findall(head))
    suffix = _REASON_SUFFIX.match(reason)
    return {
        "name": fields.get("NodeName", ""),
        "state": fields.get("State", "")[:MAX_STATE],
        "reason": (suffix.group(1) if suffix else reason).strip()[:MAX_REASON],
        "gpus": gpu_count(fields.get("Gres", "")),
        "jobs": [],
    }


def gpu_count(gres: str) -> int:
    """The gpu count of a Gres= value ("gpu:8", "gpu:h100:8(S:0-1)", "(null)" -> 0)."""
    return sum(int(count) for count in _GPUS.findall(gres))


def state_flags(state: str) -> List[str]:
    """ "DOWN+NOT_RESPONDING" -> ["DOWN", "NOT_RESPONDING"]; a trailing "*" (sinfo's spelling) too."""
    flags = state.split("+")
    if flags[0].endswith("*"):
        flags[0] = flags[0][:-1]
        flags.append("NOT_RESPONDING")
    return flags


def _rows(out: str, width: int) -> List[List[str]]:
    rows = []
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == width and parts[0]:
            rows.append(parts)
    return rows
