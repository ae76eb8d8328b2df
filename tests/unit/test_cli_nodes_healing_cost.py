"""`autopilot nodes`, `autopilot healing` and `autopilot cost` end to end through main(), against a fake API
that answers only what docs/openapi.json allows: the tables, the requests sent, a repair followed to its
end, the forecast's warning."""

# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import ACCEPTED, api, at, cluster_view, no_saved_config, operation, run  # noqa: F401  (fixtures)

NODE = "i-0123456789abcdef0"


def test_nodes_list_shows_health_and_the_repair_in_flight(api: FakeApi, run: Any) -> None:
    node = {
        "InstanceId": NODE,
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Unhealthy", "reason": "NvidiaErrorReboot", "since": at(1)},
        "repair": {"operationId": "op-7", "action": "reboot", "status": "RUNNING"},
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("nodes", "list", "ml-cluster")

    assert code == 0
    assert out.splitlines()[1].split() == [
        NODE, "workers", "ml.p5.48xlarge", "Running", "-", "Unhealthy", "NvidiaErrorReboot",
        "reboot", "RUNNING", "op-7",
    ]  # fmt: skip


@pytest.mark.parametrize("action", ["reboot", "replace"])
def test_a_node_repair_is_an_operation_to_follow(api: FakeApi, run: Any, action: str) -> None:
    api.answer("POST", f"/clusters/ml-cluster/nodes/{NODE}/{action}", (202, ACCEPTED))
    repaired = operation(
        "SUCCEEDED",
        ("Reboot Node", at(0)),
        ("Succeeded", at(2)),
        kind="ReplaceNode",
        nodeId=NODE,
        trigger="api",
    )
    api.answer("GET", "/operations/op-1", (200, repaired))
    api.answer("GET", "/clusters/ml-cluster", (200, cluster_view("InService", (2, 2))))

    code, out, err = run(
        "nodes", action, "ml-cluster", NODE, "--idempotency-key", "k-1", "--wait", "--poll", "0"
    )

    assert code == 0
    assert api.requests[0]["headers"]["Idempotency-Key"] == "k-1"
    assert f"{'node':<14}{NODE}" in out.splitlines()
    assert "ReplaceNode ml-cluster (op-1)" in err


def test_nodes_are_listed_by_group_and_age(api: FakeApi, run: Any) -> None:
    def node(instance_id: str, group: str, launched: str) -> dict[str, Any]:
        return {
            "InstanceId": instance_id, "InstanceGroupName": group, "InstanceType": "ml.p5.48xlarge",
            "InstanceStatus": {"Status": "Running"}, "LaunchTime": launched, "health": {"status": "Healthy"},
        }  # fmt: skip

    nodes = [
        node("i-0a", "workers", at(5)),
        node("i-09", "controller", at(0)),
        node("i-01", "workers", at(1)),
    ]
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": nodes}))

    code, out, _ = run("nodes", "list", "ml-cluster")

    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["i-09", "i-01", "i-0a"]


HEALING = {
    "clusterName": "ml-cluster",
    "paused": True,
    "pausedReason": "paused by hand",
    "pausedBy": "arn:aws:iam::123456789012:user/ann",
    "breaker": {"unhealthyInWindow": 0, "nodeCount": 3, "maxUnhealthyPercent": 20, "windowMinutes": 10},
    "activeRepairs": 0,
    "maxConcurrentRepairs": 4,
}


@pytest.mark.parametrize(("action", "paused"), [("pause", True), ("resume", False)])
def test_healing_pause_and_resume_put_the_switch(api: FakeApi, run: Any, action: str, paused: bool) -> None:
    api.answer("PUT", "/clusters/ml-cluster/healing", (200, {**HEALING, "paused": paused}))

    code, out, _ = run("healing", action, "ml-cluster", "--query", "paused", "--output", "json")

    assert (code, json.loads(out)) == (0, paused)
    assert json.loads(api.requests[0]["body"]) == {"paused": paused}


def test_healing_get_shows_the_breaker(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/ml-cluster/healing", (200, HEALING))

    code, out, _ = run("healing", "get", "ml-cluster")

    assert code == 0
    assert f"{'paused':<24} true" in out.splitlines()
    assert f"  {'maxUnhealthyPercent':<22} 20" in out.splitlines()


def test_healing_pause_sends_its_reason(api: FakeApi, run: Any) -> None:
    state = {
        "clusterName": "ml-cluster", "paused": True, "pausedReason": "driver update",
        "breaker": {"unhealthyInWindow": 0, "nodeCount": 4, "maxUnhealthyPercent": 50, "windowMinutes": 30},
        "activeRepairs": 0, "maxConcurrentRepairs": 2,
    }  # fmt: skip
    api.answer("PUT", "/clusters/ml-cluster/healing", (200, state))

    code, _, _ = run("healing", "pause", "ml-cluster", "--reason", "driver update")

    assert code == 0
    assert json.loads(api.requests[0]["body"]) == {"paused": True, "reason": "driver update"}


def test_cost_shows_the_estimate(api: FakeApi, run: Any) -> None:
    cost = {
        "hourlyRateUsd": 98.32,
        "monthToDateUsd": 1200.5,
        "forecastUsd": 7000.0,
        "budgetUsd": 5000.0,
        "asOf": at(0),
    }
    api.answer("GET", "/clusters/ml-cluster/cost", (200, cost))

    code, out, err = run("cost", "ml-cluster", "--output", "text", "--query", "[hourlyRateUsd, forecastUsd]")

    assert (code, out) == (0, "98.32\t7000.0\n")
    assert (
        err == "warning: the month's forecast, 7,000.00 USD, is 1.4x the cluster's budget of 5,000.00 USD\n"
    )
