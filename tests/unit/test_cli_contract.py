"""The CLI's client and docs/openapi.json (generated from the API's routes) describe the same API:
every request the client sends is an operation there, with declared query parameters and headers
and a body its schema accepts; every operation there has a client call (so a command)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from autopilot_cli.client import AutopilotClient
from autopilot_cli.operations import OPERATION_KINDS
from botocore.credentials import Credentials

from tests.samples import create_body
from tests.unit.cli_fake_api import OPENAPI, Answer, check_schema, find_operation, spec

# One entry per API method of the client, called as the commands call it.
CALLS: dict[str, Callable[[AutopilotClient], Any]] = {
    "create_cluster": lambda c: c.create_cluster(create_body(), idempotency_key="key-1"),
    "plan_create": lambda c: c.plan_create(create_body()),
    "validate": lambda c: c.validate(
        {"clusterConfig": create_body()["clusterConfig"], "provisioningParameters": {"version": "1.0.0"}}
    ),
    "list_clusters": lambda c: list(c.list_clusters(include_deleted=True)),
    "get_cluster": lambda c: c.get_cluster("ml-cluster"),
    "delete_cluster": lambda c: c.delete_cluster("ml-cluster", stack_name="vpc", idempotency_key="key-2"),
    "list_nodes": lambda c: list(c.list_nodes("ml-cluster")),
    "reboot_node": lambda c: c.reboot_node("ml-cluster", "i-0123456789abcdef0", idempotency_key="key-3"),
    "replace_node": lambda c: c.replace_node("ml-cluster", "i-0123456789abcdef0"),
    "lift_growth_block": lambda c: c.lift_growth_block("ml-cluster"),
    "scale_instance_group": lambda c: c.scale_instance_group(
        "ml-cluster", "worker-group-1", instance_count=4
    ),
    "list_operations": lambda c: list(c.list_operations("ml-cluster", kind="ReplaceNode")),
    "get_operation": lambda c: c.get_operation("op-1"),
    "get_healing": lambda c: c.get_healing("ml-cluster"),
    "set_healing": lambda c: c.set_healing("ml-cluster", paused=True, reason="driver update"),
    "get_cost": lambda c: c.get_cost("ml-cluster"),
    "get_usage": lambda c: c.get_usage("ml-cluster", by="user", month="2026-11"),
    "set_account_budgets": lambda c: c.set_account_budgets("ml-cluster", {"physics": 5000.0}),
}
TRANSPORT = {"call", "signed_request", "wait_for_operation"}  # not API operations of their own


@dataclass
class Recorder:
    requests: list[dict[str, Any]] = field(default_factory=list)

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        self.requests.append({"method": method, "url": url, "body": body, "headers": headers})
        return Answer(200, b"{}")


def sent_by(name: str) -> dict[str, Any]:
    recorder = Recorder()
    client = AutopilotClient(
        "https://abc123.execute-api.us-east-1.amazonaws.com/Prod",
        credentials=Credentials("AKIDEXAMPLE", "secret"),
        http=recorder,  # type: ignore[arg-type]
    )
    CALLS[name](client)
    [request] = recorder.requests
    return request


def test_every_api_method_of_the_client_is_under_contract() -> None:
    methods = {
        name
        for name, _ in inspect.getmembers(AutopilotClient, inspect.isfunction)
        if not name.startswith("_") and name not in TRANSPORT
    }
    assert methods == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_request_is_an_operation_of_the_api(name: str) -> None:
    request = sent_by(name)
    url = urlsplit(request["url"])
    path = url.path.removeprefix("/Prod")

    template, operation = find_operation(request["method"], path)

    parameters = operation.get("parameters", [])
    declared = {(p["in"], p["name"]) for p in parameters}
    for query_name, _ in parse_qsl(url.query):
        assert ("query", query_name) in declared, f"{template}: query parameter {query_name}"
    headers = {p["name"].lower() for p in parameters if p["in"] == "header"}
    sent_headers = {h.lower() for h in request["headers"]}
    if name == "plan_create":  # a dry run makes nothing: no retry to make safe
        assert "idempotency-key" not in sent_headers, template
    else:
        assert {"idempotency-key"} & sent_headers == {"idempotency-key"} & headers, template
    body_schema = (
        operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    )
    if body_schema is None:
        assert not request["body"], f"{request['method']} {template} takes no body"
    else:
        check_schema(json.loads(request["body"]), body_schema, f"{request['method']} {template}")


def test_every_operation_of_the_api_has_a_client_call() -> None:
    called = set()
    for request in map(sent_by, CALLS):
        template, _ = find_operation(request["method"], urlsplit(request["url"]).path.removeprefix("/Prod"))
        called.add((request["method"], template))
    offered = {
        (method.upper(), template)
        for template, operations in spec()["paths"].items()
        for method in operations
    }
    assert offered - called == set()


def test_the_operation_kinds_are_the_apis() -> None:
    document = json.loads(OPENAPI.read_text())
    assert set(OPERATION_KINDS) == set(document["components"]["schemas"]["OperationType"]["enum"])
