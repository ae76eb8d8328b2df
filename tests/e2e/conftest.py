"""e2e fixtures: one Sandbox per test module (the real template.yaml), its API served on a free port.

Only one Sandbox can run in a process at a time, so the sandbox is module-scoped: a module's tests
share it, and it stops before the next module's starts. Every test here is in the slow tier
(``make test-slow``, tests/README.md): it runs the whole control plane on a running clock.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli.client import AutopilotClient

from sandbox.apps.demo.runner import DEMO_RUN_PARAMETERS, sandbox_api_client
from sandbox.harness.core import Sandbox

ROOT = Path(__file__).resolve().parents[2]
SLURM_CONFIGS = ROOT / "tests" / "fixtures" / "configs" / "slurm"
E2E_SPEED = 1200.0
# The modules sharing this sandbox test no timeout: the workflows' deadlines are set far from the
# simulated durations (an hour of slack is 3 wall seconds at x1200, less than a starved process can lag).
E2E_PARAMETERS = {
    **DEMO_RUN_PARAMETERS,
    "CreateTimeoutSeconds": 82800,
    "DeleteTimeoutSeconds": 82800,
    "RebootDeadlineMinutes": 240,
    "ReplaceDeadlineMinutes": 360,
    "HyperPodRepairDeadlineMinutes": 360,
}


E2E_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests slow here, so a new module cannot land in the fast tier by mistake."""
    for item in items:
        if item.path.is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=E2E_PARAMETERS, speed=E2E_SPEED) as running:
        yield running


@pytest.fixture(scope="module")
def api_url(sandbox: Sandbox) -> str:
    return sandbox.serve_api(0)


@pytest.fixture(scope="module")
def api(api_url: str, sandbox: Sandbox) -> AutopilotClient:
    """The Autopilot HTTP client, signing with the sandbox's credentials (SigV4, execute-api)."""
    return sandbox_api_client(sandbox, api_url)


@pytest.fixture(scope="module")
def workshop_request(sandbox: Sandbox) -> Callable[..., dict[str, Any]]:
    """POST /clusters bodies for the module's sandbox: ``workshop_request(name, rollbackOnFailure=True)``."""
    return functools.partial(build_workshop_request, region=sandbox.region)


def build_workshop_request(name: str, *, region: str, **overrides: Any) -> dict[str, Any]:
    """A POST /clusters body from the workshop's Slurm files, for cluster ``name`` in ``region``."""
    config = json.loads((SLURM_CONFIGS / "cluster-config.json").read_text())
    provisioning = json.loads((SLURM_CONFIGS / "provisioning_parameters.json").read_text())
    config["ClusterName"] = name
    # The workshop's file names an FSx file system in us-west-2; the API refuses one of another region
    # than its stack's.
    provisioning["fsx_dns_name"] = provisioning["fsx_dns_name"].replace(".us-west-2.", f".{region}.")
    project = next(t["Value"] for t in config["Tags"] if t["Key"] == "project")
    body: dict[str, Any] = {
        "clusterConfig": config,
        "provisioningParameters": provisioning,
        "owner": "alice",
        "project": project,
        "budget": {"monthlyLimitUsd": 2500, "alertEmails": ["alice@example.com"]},
    }
    body.update(overrides)
    return body
