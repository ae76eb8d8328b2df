"""What the `autopilot` command tests share (test_cli_*.py): main() run against a fake API that answers
only what docs/openapi.json allows (cli_fake_api.py), never the user's saved config; the operation,
cluster view and cluster list builders; the create command's files and arguments."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import pytest
from autopilot_cli import common
from autopilot_cli.client import AutopilotClient
from autopilot_cli.main import main
from botocore.credentials import Credentials

from tests.samples import create_body
from tests.unit.cli_fake_api import FakeApi

ENDPOINT = "http://127.0.0.1:3000"
CREDENTIALS = Credentials("AKIDEXAMPLE", "secret", "session-token")
T0 = "2025-11-21T14:00:00Z"


@pytest.fixture(autouse=True)
def no_saved_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Never the user's own ~/.config/autopilot/config.json."""
    path = tmp_path / "config" / "autopilot.json"
    monkeypatch.setenv("AUTOPILOT_CONFIG", str(path))
    monkeypatch.delenv("AUTOPILOT_ENDPOINT", raising=False)
    return path


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()

    def client(
        endpoint: str, *, region: str | None, profile: str | None, debug: TextIO | None = None
    ) -> AutopilotClient:
        assert endpoint == ENDPOINT
        return AutopilotClient(
            endpoint,
            region=region or "us-east-1",
            credentials=CREDENTIALS,
            http=fake,  # type: ignore[arg-type]
            debug=debug,
        )

    monkeypatch.setattr(common, "make_client", client)
    monkeypatch.setenv("AUTOPILOT_ENDPOINT", ENDPOINT)
    return fake


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def at(minutes: float) -> str:
    moment = datetime(2025, 11, 21, 14, tzinfo=UTC) + timedelta(minutes=minutes)
    return moment.isoformat().replace("+00:00", "Z")


def operation(status: str = "RUNNING", *steps: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "operationId": "op-1",
        "kind": "CreateCluster",
        "clusterName": "ml-cluster",
        "status": status,
        "createdAt": T0,
        "updatedAt": steps[-1][1] if steps else T0,
        "steps": [{"name": n, "enteredAt": t} for n, t in steps],
        "executionArn": "arn:aws:states:us-east-1:123456789012:execution:create:op-1",
        **extra,
    }


def cluster_view(sagemaker_status: str = "Creating", workers: tuple[int, int] = (0, 2)) -> dict[str, Any]:
    return {
        "clusterName": "ml-cluster",
        "status": "CREATING",
        "owner": "ann",
        "sagemaker": {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
            "ClusterStatus": sagemaker_status,
            "InstanceGroups": [
                {"InstanceGroupName": "controller", "CurrentCount": 1, "TargetCount": 1},
                {"InstanceGroupName": "workers", "CurrentCount": workers[0], "TargetCount": workers[1]},
            ],
        },
    }


def summary(name: str, status: str = "ACTIVE", **extra: Any) -> dict[str, Any]:
    return {
        "clusterName": name,
        "status": status,
        "lastOperationId": "op-1",
        "createdAt": T0,
        "updatedAt": T0,
        **extra,
    }


ACCEPTED = {"operationId": "op-1", "clusterName": "ml-cluster", "status": "RUNNING"}


@pytest.fixture
def config_files(tmp_path: Path) -> dict[str, str]:
    body = create_body()
    (tmp_path / "cluster-config.json").write_text(json.dumps(body["clusterConfig"]))
    (tmp_path / "provisioning.json").write_text(json.dumps(body["provisioningParameters"]))
    return {
        "config": str(tmp_path / "cluster-config.json"),
        "provisioning": str(tmp_path / "provisioning.json"),
    }


def create_argv(config_files: dict[str, str], *more: str) -> list[str]:
    config = config_files["config"]
    return ["clusters", "create", "--cluster-config", config, "--owner", "ann", "--project", "llm", *more]


def three_clusters(api: FakeApi) -> FakeApi:
    """Two pages: a (ann, llm), b (bob, llm, CREATING); c (ann, vision)."""
    api.routes.pop(("GET", "/clusters"), None)
    api.answer(
        "GET",
        "/clusters",
        (
            200,
            {
                "clusters": [
                    summary(
                        "a",
                        owner="ann",
                        project="llm",
                        sagemakerStatus="InService",
                        createdBy="arn:aws:sts::123456789012:assumed-role/Researchers/ann",
                    ),
                    summary("b", "CREATING", owner="bob", project="llm"),
                ],
                "nextToken": "t1",
            },
        ),
        (200, {"clusters": [summary("c", owner="ann", project="vision")]}),
    )
    return api
