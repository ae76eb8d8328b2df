"""The CLI as an operator gets it: `pip install ./layers/autopilot/autopilot_config ./cli` (the rules
it shares with the layer, then the CLI) into a fresh venv of the oldest Python it supports
(cli/pyproject.toml's requires-python: Ubuntu 22.04's python3 is 3.10), then `autopilot`
against this module's sandbox API, each `--output json` answer parsed as one JSON document, with and
without `--wait` (progress goes to stderr), errors included.

The venv takes the other dependencies from the package index, as `pipx install` does, at the versions
requirements/dev.lock pins (the ones every other test runs with). The wheels are built from copies of
the two folders, so the builds leave nothing in the tree (nor a build/ in the layer's folder)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli import __version__

from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS
from sandbox.harness.core import Sandbox
from tests.e2e.conftest import ROOT, build_workshop_request

CLI = ROOT / "cli"
SHARED = ROOT / "layers" / "autopilot" / "autopilot_config"
Run = Callable[..., subprocess.CompletedProcess[str]]


def oldest_python() -> tuple[int, int]:
    """``(3, 10)`` for requires-python ``>=3.10``."""
    requires = tomllib.loads((CLI / "pyproject.toml").read_text())["project"]["requires-python"]
    match = re.fullmatch(r">=\s*3\.(\d+)", requires)
    assert match, f"cli/pyproject.toml's requires-python {requires!r} is not '>=3.N'"
    return 3, int(match.group(1))


def working_python(minor: int) -> str | None:
    candidates = [
        shutil.which(f"python3.{minor}"),
        *sorted(Path.home().glob(f".pyenv/versions/3.{minor}.*/bin/python3.{minor}")),
    ]
    for candidate in filter(None, candidates):
        # A pyenv shim may exist for a version it cannot run: try it.
        tried = subprocess.run([candidate, "-c", "import venv, ssl"], capture_output=True, check=False)
        if tried.returncode == 0:
            return str(candidate)
    return None


def interpreter() -> str:
    """The oldest supported Python this machine has (pyenv here has 3.10; the machine's python3 is
    3.11), else the first newer one: the test then says which it used."""
    _, oldest = oldest_python()
    for minor in range(oldest, sys.version_info.minor + 1):
        found = working_python(minor)
        if found:
            if minor != oldest:
                warnings.warn(f"no python3.{oldest} here: the CLI is installed with {found}", stacklevel=1)
            return found
    return sys.executable  # the running interpreter, within requires-python if the suite runs at all


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv of the oldest supported Python with the shared rules and the CLI installed in it,
    each from its own folder: nothing of the layer's ``autopilot`` package is there to borrow."""
    sources = tmp_path_factory.mktemp("cli-sources")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(CLI, sources / "cli", ignore=ignore)  # its examples link is followed: a copy
    shutil.copytree(SHARED, sources / "autopilot_config", ignore=ignore)
    venv = tmp_path_factory.mktemp("cli-venv")
    subprocess.run([interpreter(), "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run(
        [
            str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
            "--constraint", str(ROOT / "requirements" / "dev.lock"),
            str(sources / "autopilot_config"), str(sources / "cli"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=venv,
        check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def autopilot(venv: Path) -> Path:
    return venv / "bin" / "autopilot"


@pytest.fixture(scope="module")
def run(autopilot: Path, api_url: str, sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Run:
    config = tmp_path_factory.mktemp("cli-config") / "config.json"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AUTOPILOT_", "PYTHON"))},
        **SANDBOX_CREDENTIALS,
        "AWS_DEFAULT_REGION": sandbox.region,  # 127.0.0.1 names no region
        "AUTOPILOT_ENDPOINT": api_url,
        "AUTOPILOT_CONFIG": str(config),
    }

    def call(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(autopilot), *argv], env=env, capture_output=True, text=True, timeout=600, check=False
        )

    return call


@pytest.fixture(scope="module")
def request_files(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    body = build_workshop_request("e2e-cli", region=sandbox.region)
    folder = tmp_path_factory.mktemp("cli-request")
    (folder / "cluster-config.json").write_text(json.dumps(body["clusterConfig"]))
    (folder / "provisioning-parameters.json").write_text(json.dumps(body["provisioningParameters"]))
    return {"folder": folder, "project": body["project"]}


def document(result: subprocess.CompletedProcess[str]) -> Any:
    """stdout is one JSON document (what `| jq` needs), whatever went to stderr."""
    return json.loads(result.stdout)


def test_the_installed_cli_reports_its_version(run: Run) -> None:
    result = run("--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"autopilot {__version__}"


def test_create_wait_list_and_delete_wait_each_print_one_json_document(
    run: Run, request_files: dict[str, Any]
) -> None:
    folder = request_files["folder"]
    files = (
        "--cluster-config", str(folder / "cluster-config.json"),
        "--provisioning-parameters", str(folder / "provisioning-parameters.json"),
    )  # fmt: skip

    validated = run("validate", *files, "--output", "json")
    assert validated.returncode == 0, validated.stderr
    assert document(validated)["valid"] is True

    created = run(
        "clusters", "create", *files, "--owner", "alice", "--project", request_files["project"],
        "--budget-usd", "2500", "--wait", "--poll", "0.2", "--output", "json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    operation = document(created)
    assert (operation["kind"], operation["status"]) == ("CreateCluster", "SUCCEEDED")
    assert created.stderr  # the progress, kept off stdout

    listed = run("clusters", "list", "--output", "json", "--query", "[].[clusterName, status]")
    assert listed.returncode == 0, listed.stderr
    assert ["e2e-cli", "ACTIVE"] in document(listed)

    deleted = run("clusters", "delete", "e2e-cli", "--wait", "--poll", "0.2", "--output", "json")
    assert deleted.returncode == 0, deleted.stderr
    assert (document(deleted)["kind"], document(deleted)["status"]) == ("DeleteCluster", "SUCCEEDED")


def test_the_installed_cli_writes_the_examples_and_validates_them(
    run: Run, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # the wheel carries examples/ (cli/src/autopilot_cli/examples is a link to it)
    folder = tmp_path_factory.mktemp("cli-init")
    written = run("init", "--directory", str(folder), "--output", "json")
    assert written.returncode == 0, written.stderr
    assert sorted(Path(name).name for name in document(written)["files"]) == [
        "cluster-config.json",
        "provisioning_parameters.json",
    ]

    validated = run(
        "validate", "--strict", "--region", "us-east-1",
        "--cluster-config", str(folder / "cluster-config.json"),
        "--provisioning-parameters", str(folder / "provisioning_parameters.json"),
    )  # fmt: skip
    assert validated.returncode == 0, validated.stdout + validated.stderr


def test_an_error_in_json_mode_is_a_json_document(run: Run) -> None:
    result = run("clusters", "get", "nowhere", "--output", "json")

    assert result.returncode != 0
    error = document(result)["error"]
    assert (error["code"], error["status"]) == ("ApiError", 404)
    assert "nowhere" in error["message"]


def test_the_times_the_api_passes_on_parse_on_the_oldest_python(venv: Path) -> None:
    # --wait reads Step Functions' and SageMaker's times: Python 3.10's fromisoformat takes neither
    # "Z" nor a fraction of other than 3 or 6 digits.
    probe = (
        "from autopilot_cli.progress import parse_time\n"
        "for t in ('2026-11-23T10:00:00Z', '2026-11-23T10:00:00.1Z', '2026-11-23T10:00:00.123+00:00',\n"
        "          '2026-11-23T10:00:00.123456789Z'):\n"
        "    print(parse_time(t).isoformat())"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "2026-11-23T10:00:00+00:00",
        "2026-11-23T10:00:00.100000+00:00",
        "2026-11-23T10:00:00.123000+00:00",
        "2026-11-23T10:00:00.123456+00:00",
    ]


def test_the_venv_has_the_shared_rules_and_nothing_of_the_layer(venv: Path) -> None:
    # The CLI builds from its own dependencies: hyperpod-autopilot-config by name, no layer module.
    probe = (
        "from importlib.util import find_spec; from importlib.metadata import requires\n"
        "print(find_spec('autopilot') is None)\n"
        "print(find_spec('autopilot_config').origin)\n"
        "print(requires('hyperpod-autopilot-cli'))"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    no_layer, origin, requires = result.stdout.splitlines()
    assert no_layer == "True"
    assert origin.startswith(str(venv)), origin  # installed, not read from the repository
    assert "hyperpod-autopilot-config==0.1.0" in requires
