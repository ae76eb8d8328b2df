"""A fake Autopilot API for the CLI's tests that answers only what docs/openapi.json allows.

Each canned answer is checked against the operation's response schema for its status, so a CLI test
cannot pass on a field the API does not send (or spell the way the API does not).
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema

OPENAPI = Path(__file__).parents[2] / "docs" / "openapi.json"


@cache
def spec() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(OPENAPI.read_text())
    return loaded


def template_pattern(template: str) -> re.Pattern[str]:
    """``/clusters/{name}/nodes`` matches ``/clusters/a%2Fb/nodes`` (one path segment per parameter)."""
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")


def find_operation(method: str, path: str) -> tuple[str, dict[str, Any]]:
    """The spec's (path template, operation) serving ``method path``; AssertionError when none does."""
    for template, operations in spec()["paths"].items():
        if template_pattern(template).match(path) and method.lower() in operations:
            return template, operations[method.lower()]
    raise AssertionError(f"{method} {unquote(path)} is not in docs/openapi.json")


def check_schema(instance: Any, schema: dict[str, Any], where: str) -> None:
    """Validate against a schema of the spec, its ``#/components/...`` references resolved."""
    root = {**schema, "components": spec()["components"]}
    errors = sorted(jsonschema.Draft202012Validator(root).iter_errors(instance), key=str)
    assert not errors, f"{where}: {errors[0].message} at {list(errors[0].absolute_path)}"


def check_response(method: str, path: str, status: int, payload: Any) -> None:
    template, operation = find_operation(method, path)
    responses = operation["responses"]
    declared = responses.get(str(status))
    assert declared is not None, f"{method} {template} declares no {status} answer"
    schema = declared.get("content", {}).get("application/json", {}).get("schema")
    if schema is not None and not isinstance(payload, bytes):
        check_schema(payload, schema, f"{method} {template} {status}")


@dataclass
class Answer:
    status: int
    data: bytes


@dataclass
class FakeApi:
    """Answers (method, path) with queued (status, body) pairs; keeps every request it got."""

    routes: dict[tuple[str, str], deque[tuple[int, Any]]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, method: str, path: str, *answers: tuple[int, Any]) -> None:
        for status, payload in answers:
            check_response(method, path, status, payload)
        self.routes.setdefault((method, path), deque()).extend(answers)

    def answer_from_gateway(self, method: str, path: str, status: int, data: bytes) -> None:
        """What API Gateway itself sends (502, 504...): not the API's, so not in its spec."""
        self.routes.setdefault((method, path), deque()).append((status, data))

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        self.requests.append({"method": method, "url": url, "body": body or b"", "headers": headers})
        queue = self.routes.get((method, urlsplit(url).path))
        if not queue:
            return Answer(404, b'{"message": "no such resource"}')
        status, payload = queue[0] if len(queue) == 1 else queue.popleft()
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return Answer(status, data)
