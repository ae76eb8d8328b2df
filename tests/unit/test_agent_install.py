"""agent/install.sh: installs into AUTOPILOT_AGENT_ROOT, idempotently; refuses a node without slurmctld; says
so when systemd is not there to start the service. Run with a PATH of the tools it needs and nothing else
(no systemctl; pgrep a stand-in that answers as a node with or without slurmctld would)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parents[2] / "agent"
TOOLS = ("bash", "dirname", "mkdir", "rm", "cp", "mv", "find", "install", "env")


def node(tmp_path: Path, *, slurmctld: bool) -> dict[str, str]:
    """A PATH for install.sh: the real tools, python3, and a pgrep that finds slurmctld or not."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))  # the interpreter, not a shim
    pgrep = bin_dir / "pgrep"
    pgrep.write_text(f"#!/bin/sh\n[ \"$*\" = '-x slurmctld' ] && exit {0 if slurmctld else 1}\nexit 2\n")
    pgrep.chmod(0o755)
    return {"PATH": str(bin_dir), "AUTOPILOT_AGENT_ROOT": str(tmp_path / "root")}


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """autopilot-agent/ as an operator puts it in the lifecycle-scripts prefix: agent/ plus config.json."""
    target = tmp_path / "lifecycle" / "autopilot-agent"
    shutil.copytree(AGENT, target, ignore=shutil.ignore_patterns("__pycache__"))
    config = json.loads((AGENT / "config.example.json").read_text()) | {"clusterName": "ml-cluster"}
    (target / "config.json").write_text(json.dumps(config))
    return target


def install(package: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(package / "install.sh")], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_installs_the_files_and_says_it_could_not_start_the_service(tmp_path: Path, package: Path) -> None:
    env = node(tmp_path, slurmctld=True)

    first = install(package, env)
    (package / "autopilot_agent" / "stale.py").write_text("")
    (tmp_path / "root" / "opt" / "autopilot-agent" / "autopilot_agent" / "old.py").write_text("")
    second = install(package, env)  # idempotent: updates in place

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    root = tmp_path / "root"
    installed = root / "opt" / "autopilot-agent" / "autopilot_agent"
    assert sorted(p.name for p in installed.glob("*.py")) == sorted(
        [p.name for p in (AGENT / "autopilot_agent").glob("*.py")] + ["stale.py"]
    )
    assert not (installed / "old.py").exists()  # the package is replaced whole
    assert not list(installed.rglob("__pycache__"))
    config = json.loads((root / "etc" / "autopilot-agent" / "config.json").read_text())
    assert config["clusterName"] == "ml-cluster"
    unit = (root / "etc" / "systemd" / "system" / "autopilot-agent.service").read_text()
    assert "Restart=always" in unit
    assert "ExecStart=/usr/bin/env python3 -m autopilot_agent" in unit
    assert "could not start the service" in second.stderr
    assert "systemctl daemon-reload && systemctl enable --now autopilot-agent" in second.stderr

    # what the unit will run, runs from the installed copy
    check = subprocess.run(
        ["python3", "-m", "autopilot_agent", "--check"],
        env={
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(installed.parent),
            "AUTOPILOT_AGENT_CONFIG": str(root / "etc" / "autopilot-agent" / "config.json"),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert "cluster ml-cluster" in check.stderr


def test_refuses_a_node_that_is_not_the_slurm_controller(tmp_path: Path, package: Path) -> None:
    result = install(package, node(tmp_path, slurmctld=False))

    assert result.returncode == 1
    assert "no slurmctld runs on this node" in result.stderr
    assert "Slurm controller only" in result.stderr
    assert not (tmp_path / "root").exists()


def test_refuses_an_unusable_config(tmp_path: Path, package: Path) -> None:
    bad = {"apiUrl": "ftp://x", "clusterName": "c", "region": "us-west-2"}
    (package / "config.json").write_text(json.dumps(bad))

    result = install(package, node(tmp_path, slurmctld=True))

    assert result.returncode == 1
    assert "apiUrl must be" in result.stderr
    assert not (tmp_path / "root").exists()


def test_refuses_without_a_config(tmp_path: Path, package: Path) -> None:
    (package / "config.json").unlink()

    result = install(package, node(tmp_path, slurmctld=True))

    assert result.returncode == 1
    assert "config.json is missing" in result.stderr
