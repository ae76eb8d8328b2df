"""The workflows and the DAL spell the state table from one place: the record models.

Every DynamoDB write in statemachines/*.asl.json addresses an item by the DAL's key (cluster_key /
operation_key / node_key / healing_key), sets only attributes the record model of that item declares
(and the DAL's ``kind``), and writes only status values that model's enum knows; a rename on either
side fails here, not in production.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autopilot.dal.healing import healing_key, node_key
from autopilot.dal.table import cluster_key, operation_key
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    HealingState,
    NodeRecord,
    Operation,
    OperationStatus,
)
from pydantic import BaseModel

STATEMACHINES = Path(__file__).resolve().parents[2] / "statemachines"


def _spelled(key: dict[str, str]) -> tuple[str, str]:
    """A DAL key of variable parts "x" / "y" as the ASL spells its literal part (pk, sk)."""
    return (key["pk"].removesuffix("x"), key["sk"].removesuffix("x").removesuffix("y"))


# Items by (pk, sk) as the ASL spells them: their record model, and the status enum if they have one.
ITEMS: dict[tuple[str, str], tuple[type[BaseModel], type[ClusterStatus] | type[OperationStatus] | None]] = {
    _spelled(cluster_key("x")): (Cluster, ClusterStatus),
    _spelled(operation_key("x")): (Operation, OperationStatus),
    _spelled(node_key("x", "y")): (NodeRecord, None),
    _spelled(healing_key("x")): (HealingState, None),
}
# The DAL's own attribute on every listed item (the by-kind index), in no record model.
DAL_ATTRIBUTES = {"kind"}
_LITERAL_PREFIX = re.compile(r"\{%\s*'([A-Z]+#)'\s*&")
_SET_NAME = re.compile(r"(?:^|,)\s*([#\w]+)\s*=")
_CLAUSE = re.compile(r"\b(SET|REMOVE|ADD|DELETE)\b")


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
        # SET a = ..., b = ... / REMOVE a, b / ADD a :v, b :w / DELETE a :v
        found = _SET_NAME.findall(clause) if keyword == "SET" else [n.split()[0] for n in clause.split(",")]
        attributes |= {names.get(name, name) for name in found}
    return attributes


WRITES = list(dynamodb_writes())


def _literal(part: str) -> str:
    """A key part's literal text: the prefix an expression starts with, or the whole literal."""
    match = _LITERAL_PREFIX.match(part)
    return match.group(1) if match else part


def test_the_workflows_write_the_state_table() -> None:
    assert len(WRITES) >= 4  # each workflow records its cluster and its operation, on success and failure


@pytest.mark.parametrize(("state", "arguments"), WRITES, ids=[state for state, _ in WRITES])
def test_a_write_uses_the_dal_key_and_the_record_model(state: str, arguments: dict[str, Any]) -> None:
    key = arguments["Key"]
    spelled = (_literal(key["pk"]["S"]), _literal(key["sk"]["S"]))
    assert spelled in ITEMS, f"{state}: key {key}"
    model, statuses = ITEMS[spelled]
    declared = {field.alias or name for name, field in model.model_fields.items()} | DAL_ATTRIBUTES
    assert set_attributes(arguments) <= declared, f"{state}: {set_attributes(arguments) - declared}"
    if statuses is None:
        return
    status_placeholder = re.search(r"#status\s*=\s*(:\w+)", arguments["UpdateExpression"])
    assert status_placeholder is not None, f"{state}: writes no status"
    status = arguments["ExpressionAttributeValues"][status_placeholder.group(1)]["S"]
    literal_statuses = re.findall(r"'([A-Z_]+)'", status) if "{%" in status else [status]
    assert literal_statuses, f"{state}: status {status}"
    assert set(literal_statuses) <= {s.value for s in statuses}, f"{state}: {status}"
