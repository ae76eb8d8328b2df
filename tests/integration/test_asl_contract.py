"""Static checks of both ASL files: service-model validity, Retry/Catch on every Task, names, contracts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from autopilot.events import DETAIL_TYPES, SOURCE, OperationEventDetail
from autopilot.operations import (
    CREATE_MEMBERS_REQUIRED,
    CleanupClusterWorkflowInput,
    CreateClusterWorkflowInput,
)
from botocore.model import ListShape, Shape, StructureShape
from pydantic import BaseModel

from sandbox import seams

ROOT = Path(__file__).resolve().parents[2]
MACHINES: dict[str, type[BaseModel]] = {
    "create_cluster": CreateClusterWorkflowInput,
    "cleanup_cluster": CleanupClusterWorkflowInput,
}
SDK = re.compile(r"^arn:\$\{Partition\}:states:::aws-sdk:(?P<service>[a-z0-9]+):(?P<action>[a-zA-Z]+)$")
OPTIMIZED = {
    "arn:${Partition}:states:::dynamodb:updateItem": ("dynamodb", "UpdateItem"),
    "arn:${Partition}:states:::events:putEvents": ("events", "PutEvents"),
}
TITLE_CASE = re.compile(r"^[A-Z][a-z]*( [A-Z][a-z]*)*$")
_session = botocore.session.get_session()


def definition(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((ROOT / "statemachines" / f"{name}.asl.json").read_text())
    return document


def tasks(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for state_name, state in definition(name)["States"].items():
        if state["Type"] == "Task":
            yield state_name, state


def all_tasks() -> list[tuple[str, str, dict[str, Any]]]:
    return [(machine, state_name, state) for machine in MACHINES for state_name, state in tasks(machine)]


def operation_input(resource: str) -> StructureShape:
    match = SDK.match(resource)
    if match:
        model = _session.get_service_model(match["service"])
        action = match["action"][0].upper() + match["action"][1:]
    else:
        service, action = OPTIMIZED[resource]
        model = _session.get_service_model(service)
    shape = model.operation_model(action).input_shape
    assert isinstance(shape, StructureShape)
    return shape


def check_payload(value: Any, shape: Shape, where: str) -> list[str]:
    """Member names must exist; literal values must have the member's type (paths are checked at runtime)."""
    problems: list[str] = []
    if isinstance(shape, StructureShape):
        if not isinstance(value, dict):
            return [f"{where}: expected a structure"]
        for key, member_value in value.items():
            name = key.removesuffix(".$")
            if name not in shape.members:
                problems.append(f"{where}.{name}: not a member of {shape.name}")
            elif not key.endswith(".$"):
                problems += check_payload(member_value, shape.members[name], f"{where}.{name}")
        missing = [m for m in shape.required_members if m not in {k.removesuffix(".$") for k in value}]
        problems += [f"{where}.{m}: required by {shape.name}" for m in missing]
    elif isinstance(shape, ListShape):
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        for index, item in enumerate(value):
            problems += check_payload(item, shape.member, f"{where}[{index}]")
    elif shape.type_name == "map":
        if not isinstance(value, dict):
            problems.append(f"{where}: expected a map")
    elif shape.type_name == "string":
        if not isinstance(value, str):
            problems.append(f"{where}: expected a string")
        elif "enum" in shape.metadata and value not in shape.metadata["enum"]:
            problems.append(f"{where}: {value!r} not in {shape.metadata['enum']}")
    elif shape.type_name in ("integer", "long", "double", "float"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(f"{where}: expected a number")
    elif shape.type_name == "boolean" and not isinstance(value, bool):
        problems.append(f"{where}: expected a boolean")
    return problems


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_task_parameters_match_the_service_model(
    machine: str, state_name: str, state: dict[str, Any]
) -> None:
    shape = operation_input(state["Resource"])
    parameters = state["Parameters"]
    if state["Resource"].endswith("events:putEvents"):
        # the optimized integration takes Detail as JSON (an object), not a string
        entry_shape = shape.members["Entries"]
        assert isinstance(entry_shape, ListShape)
        entries = [{k: v for k, v in e.items() if k != "Detail"} for e in parameters["Entries"]]
        assert check_payload({"Entries": entries}, shape, state_name) == []
        return
    assert check_payload(parameters, shape, state_name) == []


def test_the_contract_check_catches_a_misspelled_member() -> None:
    shape = operation_input("arn:${Partition}:states:::aws-sdk:sagemaker:addTags")
    assert check_payload({"ResourceArn.$": "$.x", "Tag": []}, shape, "Tag Cluster") == [
        "Tag Cluster.Tag: not a member of AddTagsInput",
        "Tag Cluster.Tags: required by AddTagsInput",
    ]


@pytest.mark.parametrize(
    ("machine", "state_name", "state"), all_tasks(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_task_retries_with_jitter_and_catches_into_a_named_state(
    machine: str, state_name: str, state: dict[str, Any]
) -> None:
    retriers = [r for r in state["Retry"] if r.get("MaxAttempts", 3) > 0]
    assert retriers, f"{state_name} never retries"
    assert all(r["JitterStrategy"] == "FULL" and r["BackoffRate"] > 1 for r in retriers)
    catchers = state["Catch"]
    assert catchers[-1]["ErrorEquals"] == ["States.ALL"]
    states = definition(machine)["States"]
    assert all(c["Next"] in states for c in catchers)


def error_names(state: dict[str, Any]) -> set[str]:
    return {name for rule in state.get("Retry", []) + state.get("Catch", []) for name in rule["ErrorEquals"]}


@pytest.mark.parametrize("machine", MACHINES)
def test_error_names_use_the_aws_spelling_of_the_service(machine: str) -> None:
    """Step Functions names errors ``SageMaker.X`` / ``Budgets.X``, never after the lower-case ARN
    service (``sagemaker.X``, moto's spelling without the sandbox seam): such a name never matches."""
    for state_name, state in tasks(machine):
        for name in error_names(state):
            service = name.partition(".")[0]
            assert service[:1].isupper(), f"{state_name}: {name} is named after a lower-case service"
        match = SDK.match(state["Resource"])
        if match:
            spelling = seams.AWS_SDK_ERROR_SERVICE_NAMES.get(match["service"])
            prefixes = {name.partition(".")[0] for name in error_names(state)} - {"States"}
            assert prefixes <= {spelling}, f"{state_name}: {prefixes} for {match['service']}"


def test_the_sandbox_names_the_errors_of_every_aws_sdk_service_the_asl_calls() -> None:
    """Without it moto's executor names them sagemaker.X and the ASL's Retry/Catch never match."""
    called = {match["service"] for _, _, state in all_tasks() if (match := SDK.match(state["Resource"]))}
    assert called <= set(seams.AWS_SDK_ERROR_SERVICE_NAMES), called - set(seams.AWS_SDK_ERROR_SERVICE_NAMES)


@pytest.mark.parametrize("machine", MACHINES)
def test_states_are_title_case_and_every_transition_exists(machine: str) -> None:
    document = definition(machine)
    states = document["States"]
    assert document["StartAt"] in states
    for name, state in states.items():
        assert TITLE_CASE.match(name), name
        targets = [state.get("Next"), state.get("Default")]
        targets += [c["Next"] for c in state.get("Choices", [])] + [c["Next"] for c in state.get("Catch", [])]
        assert all(t in states for t in targets if t), name
    reachable = {document["StartAt"]}
    frontier = [document["StartAt"]]
    while frontier:
        state = states[frontier.pop()]
        for target in [state.get("Next"), state.get("Default")] + [
            c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])
        ]:
            if target and target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert reachable == set(states), f"unreachable: {set(states) - reachable}"


@pytest.mark.parametrize("machine", MACHINES)
def test_the_workflow_reads_only_fields_its_input_model_has(machine: str) -> None:
    states = definition(machine)["States"]
    # ResultSelector paths address the service's answer, and $$. the context object: not the input
    text = json.dumps({n: {k: v for k, v in s.items() if k != "ResultSelector"} for n, s in states.items()})
    top_level = set(re.findall(r"(?<!\$)\$\.([a-zA-Z]+)", text))
    produced = {"failure", "created", "cluster", "polls", "leftovers"} | {
        "recordFailure",
        "rollbackFailure",
        "eventFailure",
        "budgetExisted",
        "alreadyGone",
        "gone",
        "noBudget",
    }
    known = {field.alias for field in MACHINES[machine].model_fields.values()} | produced
    assert top_level <= known, top_level - known


def test_create_cluster_states_pass_exactly_the_members_the_api_allows() -> None:
    states = definition("create_cluster")["States"]
    plain = {k.removesuffix(".$") for k in states["Create Cluster"]["Parameters"]}
    with_orchestrator = {
        k.removesuffix(".$") for k in states["Create Cluster With Orchestrator"]["Parameters"]
    }
    assert plain == {*CREATE_MEMBERS_REQUIRED, "Tags"}
    assert with_orchestrator == plain | {"Orchestrator"}


@pytest.mark.parametrize("machine", MACHINES)
def test_emitted_events_follow_the_event_contract(machine: str) -> None:
    for state_name, state in tasks(machine):
        if not state["Resource"].endswith("events:putEvents"):
            continue
        [entry] = state["Parameters"]["Entries"]
        assert entry["Source"] == SOURCE
        assert entry["DetailType"] in DETAIL_TYPES
        fields = {k.removesuffix(".$") for k in entry["Detail"]}
        assert fields <= set(OperationEventDetail.model_json_schema(by_alias=True)["properties"]), state_name


@pytest.mark.parametrize("machine", MACHINES)
def test_the_operation_status_is_the_last_record_written(machine: str) -> None:
    """A client that sees SUCCEEDED/FAILED must also see the cluster's status and every step."""
    states = definition(machine)["States"]
    for final_record in ("Record Success", "Record Failure"):
        name = states[final_record]["Next"]
        while name:
            state = states[name]
            assert not state.get("Resource", "").endswith("dynamodb:updateItem"), (
                f"{name} after {final_record}"
            )
            name = state.get("Next")
