"""The processes a sandbox Slurm cluster started: found by what they hold open under its work directory
(its daemons' logs, which slurmstepd and the jobs inherit) and by session, and killed until none is left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path


def processes_using(prefix: str) -> set[int]:
    """Processes with a file, working directory or argument under ``prefix`` (Slurm's daemons hold their
    log open; slurmstepd inherits it), and everything in their sessions (the job tasks)."""
    me = {os.getpid(), os.getsid(0)}
    found: set[int] = set()
    sessions: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in me:
            continue
        pid = int(entry.name)
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
            links.append(os.readlink(entry / "cwd"))
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if prefix in cmdline or any(link.startswith(prefix) for link in links):
            found.add(pid)
            try:
                sessions.add(os.getsid(pid))
            except OSError:
                continue
    sessions -= me
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in me:
            try:
                if os.getsid(int(entry.name)) in sessions:
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def kill_using(prefix: str, timeout: float = 5.0) -> None:
    """SIGKILL what uses ``prefix`` until nothing does: a killed process takes a moment to die, and a
    slurmstepd can fork between a scan and its kill (CI saw both)."""
    deadline = time.monotonic() + timeout
    while (pids := processes_using(prefix)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def spawn(argv: list[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    # its own session: a Ctrl-C in the terminal reaches the sandbox, which stops the daemons in order
    return subprocess.Popen(
        argv,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
