"""The workflows and the DAL spell the state table from one place: the record models.

Every DynamoDB write in statemachines/*.asl.json addresses an item by the DAL's key (cluster_key /
operation_key), sets only attributes the record model of that item declares, and writes only status
values that model's enum knows; a rename on either side fails here, not in production.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autopilot.dal.state_table import cluster_key, operation_key
from autopilot.models.records import Cluster, ClusterStatus, Operation, OperationStatus
from pydantic import BaseModel

STATEMACHINES = Path(__file__).resolve().parents[2] / "statemachines"
ITEMS: dict[str, tuple[type[BaseModel], type[ClusterStatus] | type[OperationStatus]]] = {
    cluster_key("x")["pk"].removesuffix("x"): (Cluster, ClusterStatus),
    operation_key("x")["pk"].removesuffix("x"): (Operation, OperationStatus),
}
_LITERAL_PREFIX = re.compile(r"\{%\s*'([A-Z]+#)'\s*&")
_SET_NAME = re.compile(r"(?:^|,)\s*([#\w]+)\s*=")
_CLAUSE = re.compile(r"\b(SET|REMOVE)\b")


def dynamodb_writes() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(STATEMACHINES.glob("*.asl.json")):
        yield from _tasks(path.name, json.loads(path.read_text())["States"])


def _tasks(where: str, states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        if str(state.get("Resource", "")).endswith(":states:::dynamodb:updateItem"):
            yield f"{where}: {name}", state["Arguments"]
        for branch in state.get("Branches", []) + (
            [state["ItemProcessor"]] if "ItemProcessor" in state else []
        ):
            yield from _tasks(f"{where}: {name}", branch["States"])


def set_attributes(arguments: dict[str, Any]) -> set[str]:
    names = arguments.get("ExpressionAttributeNames", {})
    parts = _CLAUSE.split(arguments["UpdateExpression"])
    attributes: set[str] = set()
    for keyword, clause in zip(parts[1::2], parts[2::2], strict=True):
        found = _SET_NAME.findall(clause) if keyword == "SET" else [n.strip() for n in clause.split(",")]
        attributes |= {names.get(name, name) for name in found}
    return attributes


WRITES = list(dynamodb_writes())


def test_the_workflows_write_the_state_table() -> None:
    assert len(WRITES) >= 4  # each workflow records its cluster and its operation, on success and failure


@pytest.mark.parametrize(("state", "arguments"), WRITES, ids=[state for state, _ in WRITES])
def test_a_write_uses_the_dal_key_and_the_record_model(state: str, arguments: dict[str, Any]) -> None:
    key = arguments["Key"]
    prefixes = {_LITERAL_PREFIX.match(key[part]["S"]).group(1) for part in ("pk", "sk")}  # type: ignore[union-attr]
    assert len(prefixes) == 1, f"{state}: pk and sk of different items {key}"
    assert prefixes <= ITEMS.keys(), f"{state}: key {key}"
    model, statuses = ITEMS[prefixes.pop()]
    declared = {field.alias or name for name, field in model.model_fields.items()}
    assert set_attributes(arguments) <= declared, f"{state}: {set_attributes(arguments) - declared}"
    status_placeholder = re.search(r"#status\s*=\s*(:\w+)", arguments["UpdateExpression"])
    assert status_placeholder is not None, f"{state}: writes no status"
    status = arguments["ExpressionAttributeValues"][status_placeholder.group(1)]["S"]
    literal_statuses = re.findall(r"'([A-Z_]+)'", status) if "{%" in status else [status]
    assert literal_statuses, f"{state}: status {status}"
    assert set(literal_statuses) <= {s.value for s in statuses}, f"{state}: {status}"
