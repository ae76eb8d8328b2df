"""Sample events from events/ (the same files `sam local invoke -e` uses), varied with small builders."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


def load_event(name: str) -> dict[str, Any]:
    """events/<name> as a fresh dict (e.g. ``load_event("api/create_cluster.json")``)."""
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def api_event(
    name: str,
    *,
    body: Any = ...,
    raw_body: str | None = None,
    path_parameters: dict[str, str] | None = None,
    query: dict[str, str] | None = ...,  # type: ignore[assignment]
) -> dict[str, Any]:
    """An API Gateway REST event from events/api/<name>.json with its body, path or query replaced."""
    event = copy.deepcopy(load_event(f"api/{name}.json"))
    if body is not ...:
        event["body"] = json.dumps(body)
    if raw_body is not None:
        event["body"] = raw_body
    if path_parameters is not None:
        event["pathParameters"] = path_parameters
        path = event["resource"]
        for key, value in path_parameters.items():
            path = path.replace("{" + key + "}", value)
        event["path"] = path
        event["requestContext"]["path"] = f"/dev{path}"
    if query is not ...:
        event["queryStringParameters"] = query
        event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    return event


def create_body(name: str = "ml-cluster", **changes: Any) -> dict[str, Any]:
    """The POST /clusters body of events/api/create_cluster.json, renamed, with top-level changes."""
    body: dict[str, Any] = json.loads(load_event("api/create_cluster.json")["body"])
    body["clusterConfig"]["ClusterName"] = name
    body.update(changes)
    return body


# ApiFunction's environment for the use-case tests that build its settings themselves (ApiSettings).
API_ENVIRONMENT: dict[str, str] = {
    "STATE_TABLE_NAME": "state",
    "CREATE_CLUSTER_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:create",
    "CLEANUP_CLUSTER_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:cleanup",
    "ALERTS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alerts",
    "BUDGET_NOTIFICATIONS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:budget-notifications",
    "IDEMPOTENCY_TABLE_NAME": "idempotency",
    "AWS_REGION": "us-east-1",
    "EXECUTION_ROLE_NAME_PATTERNS": "*",
    "ADMIN_PRINCIPAL_ARNS": "",
    "AUTOPILOT_STACK_NAME": "autopilot",
}
