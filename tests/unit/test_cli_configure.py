"""`autopilot configure` end to end through main(): the API's URL read off the stack's outputs (botocore's
Stubber) or given, saved, and used by the next command; a stack without the API refused."""

# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli import common, configure
from autopilot_cli.client import AutopilotClient
from autopilot_cli.main import main
from botocore.session import Session as BotocoreSession
from botocore.stub import Stubber

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import CREDENTIALS, no_saved_config, run  # noqa: F401  (fixtures)

API_URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/Prod"


@pytest.fixture
def stacks(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    client = BotocoreSession().create_client("cloudformation", region_name="eu-west-1")
    stubber = Stubber(client)
    monkeypatch.setattr(configure, "cloudformation", lambda session, region: client)
    return stubber


def stack(outputs: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "Stacks": [
            {
                "StackName": "autopilot",
                "CreationTime": datetime(2025, 11, 1, tzinfo=UTC),
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": outputs,
            }
        ]
    }


def test_configure_reads_the_api_url_from_the_stack_and_commands_use_it(
    stacks: Stubber, run: Any, no_saved_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stacks.add_response(
        "describe_stacks",
        stack(
            [{"OutputKey": "TableName", "OutputValue": "t"}, {"OutputKey": "ApiUrl", "OutputValue": API_URL}]
        ),
        {"StackName": "autopilot"},
    )
    with stacks:
        code, out, _ = run("configure", "--stack", "autopilot", "--region", "eu-west-1", "--output", "json")

    assert code == 0
    assert json.loads(out) == {
        "configFile": str(no_saved_config),
        "endpoint": API_URL,
        "region": "eu-west-1",
        "stack": "autopilot",
    }
    assert json.loads(no_saved_config.read_text())["endpoint"] == API_URL
    used = FakeApi()
    monkeypatch.setattr(
        common,
        "make_client",
        lambda endpoint, *, region, profile, debug=None: AutopilotClient(
            endpoint,
            region=region,
            credentials=CREDENTIALS,
            http=used,  # type: ignore[arg-type]
        ),
    )
    main(["clusters", "list"])
    assert used.requests[0]["url"] == f"{API_URL}/clusters"
    assert "/eu-west-1/execute-api/" in used.requests[0]["headers"]["Authorization"]


@pytest.mark.parametrize(
    ("outputs", "error"),
    [
        ([], "stack autopilot has no ApiUrl output: is it an Autopilot stack?"),
        (None, "cannot read stack autopilot: Stack with id autopilot does not exist"),
    ],
)
def test_configure_refuses_a_stack_without_the_api(
    stacks: Stubber, run: Any, no_saved_config: Path, outputs: list[dict[str, str]] | None, error: str
) -> None:
    if outputs is None:
        stacks.add_client_error(
            "describe_stacks", "ValidationError", "Stack with id autopilot does not exist", 400
        )
    else:
        stacks.add_response("describe_stacks", stack(outputs), {"StackName": "autopilot"})
    with stacks:
        code, _, err = run("configure", "--stack", "autopilot", "--region", "eu-west-1")

    assert code == 1
    assert error in err
    assert not no_saved_config.exists()


def test_configure_an_endpoint_directly(run: Any, no_saved_config: Path) -> None:
    code, out, _ = run("configure", "--endpoint", API_URL)

    assert code == 0
    assert "region      eu-west-1" in out
    assert json.loads(no_saved_config.read_text()) == {"endpoint": API_URL, "region": "eu-west-1"}
