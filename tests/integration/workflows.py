"""Driving the deployed workflows from tests: start through the API's logic, wait, read the history."""

from __future__ import annotations

import time
from typing import Any

from autopilot.api.models import CreateClusterBody
from autopilot.operations import ClusterOperations
from autopilot.settings import api_settings

from tests.events import create_body
from tests.events.stack import Deployed


def operations() -> ClusterOperations:
    return ClusterOperations(api_settings())


def start(name: str = "ml-cluster", **changes: Any) -> str:
    body = CreateClusterBody.model_validate(create_body(name, **changes))
    return operations().create_cluster(body, requested_by="tester").operation_id


def wait(stack: Deployed, operation_id: str, timeout: float = 60.0) -> dict[str, Any]:
    sfn = stack.client("stepfunctions")
    arn = operations().get_operation(operation_id).execution_arn
    assert arn
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stack.hyperpod.tick()
        execution = sfn.describe_execution(executionArn=arn)
        if execution["status"] != "RUNNING":
            return dict(execution)
        time.sleep(0.2)
    raise AssertionError(f"execution {arn} still running after {timeout}s")


def history(stack: Deployed, execution_arn: str) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    return list(sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"])


def entered(events: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
