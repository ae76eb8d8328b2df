"""The agent runs on the HyperPod Slurm AMI's python3 (3.8 on Ubuntu 20.04 images) with nothing installed:
its source parses as Python 3.8 and imports the standard library only."""

from __future__ import annotations

import ast
import glob
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

AGENT = Path(__file__).resolve().parents[2] / "agent" / "autopilot_agent"
SOURCES = sorted(AGENT.glob("*.py"))
# standard-library modules and attributes that came after 3.8
NEWER_MODULES = {"zoneinfo", "graphlib", "tomllib", "_tokenize"}
NEWER_NAMES = {
    "removeprefix",
    "removesuffix",
    "UTC",
    "cache",
    "pairwise",
    "bit_count",
    "randbytes",
    "TaskGroup",
}


def test_the_agent_has_modules() -> None:
    assert {path.name for path in SOURCES} >= {"__main__.py", "client.py", "loop.py", "slurm.py", "sigv4.py"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_the_source_is_python_38_with_the_standard_library_only(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 8))  # a match statement, (a := b) in [] ... fail

    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    assert imported - {"__future__"} <= set(sys.stdlib_module_names) - NEWER_MODULES
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} | {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
    }
    assert not names & NEWER_NAMES
    if path.name != "__init__.py":
        # list[str] / X | None in annotations are fine on 3.8 only when annotations are not evaluated
        first = next(node for node in tree.body if not isinstance(node, ast.Expr))
        assert isinstance(first, ast.ImportFrom)
        assert first.module == "__future__"


def python38() -> str | None:
    """A Python 3.8 interpreter on this machine (pyenv's, as on the developers' and CI's), or None."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    for candidate in filter(None, [*pyenv, shutil.which("python3.8")]):
        probe = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False)
        if probe.returncode == 0 and probe.stdout.startswith("Python 3.8"):
            return candidate
    return None


def test_the_agent_runs_a_round_on_python_38(tmp_path: Path) -> None:
    """One --once round under a real 3.8: config, credentials, SigV4, the client, a command parsed (its
    deadline a "Z" time, which 3.8's fromisoformat does not take as such) and its result sent back."""
    interpreter = python38()
    if interpreter is None:
        pytest.skip("no Python 3.8 here (pyenv install 3.8): the agent's 3.8 run is not checked")
    reports: list[dict[str, Any]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            reports.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            assert self.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
            commands = (
                []
                if len(reports) > 1
                else [
                    {
                        "commandId": "c1",
                        "verb": "drain",
                        "node": "ip-10-1-2-3",
                        "reason": "r",
                        "deadline": "2099-01-01T00:00:00.000Z",
                    }
                ]
            )
            body = json.dumps({"commands": commands, "pollSeconds": 10}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    config = tmp_path / "config.json"
    url = f"http://127.0.0.1:{server.server_address[1]}/Prod"
    config.write_text(json.dumps({"apiUrl": url, "region": "us-west-2", "clusterName": "ml-cluster"}))
    try:
        done = subprocess.run(
            [interpreter, "-m", "autopilot_agent", "--once"],
            env={
                "PATH": str(tmp_path),  # no Slurm here: the drain fails, as a result
                "PYTHONPATH": str(AGENT.parent),
                "AUTOPILOT_AGENT_CONFIG": str(config),
                "AWS_ACCESS_KEY_ID": "AKID",
                "AWS_SECRET_ACCESS_KEY": "secret",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        server.shutdown()
        server.server_close()

    assert done.returncode == 0, done.stderr
    assert len(reports) == 2
    (result,) = reports[1]["results"]
    assert (result["commandId"], result["ok"]) == ("c1", False)
    assert result["error"].startswith("sinfo: ")  # Slurm's list could not be read: nothing was run
