"""docs/workflows/<name>.md: one page per state machine, current with its ASL, every state and every
transition (Next, Choice rules, Default, Catch) drawn."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sandbox.apps import docgen

ASL_FILES = sorted(docgen.STATEMACHINES.glob("*.asl.json"))
_NODE = re.compile(r'^    (s\d+)[\[({]+"(.*?)(?:<br/>.*)?"[\])}]+$')
_EDGE = re.compile(r'^    (s\d+) (-->|-\.->)(?:\|"(.*)"\|)? (s\d+)$')


def _diagram(page: str) -> tuple[dict[str, str], set[tuple[str, str, str, str]]]:
    """(node id → state name, {(from, arrow, label, to)}) of the page's Mermaid block."""
    block = page.split("```mermaid\n", 1)[1].split("```", 1)[0]
    names: dict[str, str] = {}
    edges: set[tuple[str, str, str, str]] = set()
    for line in block.splitlines():
        if node := _NODE.match(line):
            names[node.group(1)] = node.group(2).replace("#quot;", '"')
        elif edge := _EDGE.match(line):
            edges.add((edge.group(1), edge.group(2), edge.group(3) or "", edge.group(4)))
    return names, edges


def test_one_page_per_state_machine_and_none_left_over() -> None:
    assert ASL_FILES, "no statemachines/*.asl.json found"
    pages = sorted(path.name for path in docgen.WORKFLOW_DOCS.glob("*.md"))
    assert pages == sorted(asl.name.removesuffix(".asl.json") + ".md" for asl in ASL_FILES)


@pytest.mark.parametrize("asl", ASL_FILES, ids=lambda path: path.name)
def test_committed_page_is_current(asl: Path) -> None:
    page = docgen.WORKFLOW_DOCS / (asl.name.removesuffix(".asl.json") + ".md")
    assert page.read_text() == docgen.workflow_doc(asl), f"{page.name} is stale: run make docs"


@pytest.mark.parametrize("asl", ASL_FILES, ids=lambda path: path.name)
def test_every_state_and_transition_is_drawn(asl: Path) -> None:
    definition = json.loads(asl.read_text())
    names, edges = _diagram(docgen.workflow_doc(asl))
    ids = {name: node_id for node_id, name in names.items()}
    assert set(ids) == set(definition["States"])
    for name, state in definition["States"].items():
        here = ids[name]
        for rule in state.get("Choices", []):
            assert any(
                edge[0] == here and edge[1] == "-->" and edge[3] == ids[rule["Next"]] and edge[2] != "default"
                for edge in edges
            ), f"{name}: Choice rule to {rule['Next']}"
        if "Default" in state:
            assert (here, "-->", "default", ids[state["Default"]]) in edges, f"{name}: Default"
        if "Next" in state:
            assert (here, "-->", "", ids[state["Next"]]) in edges, f"{name}: Next"
        for catch in state.get("Catch", []):
            caught = [
                edge
                for edge in edges
                if edge[0] == here and edge[1] == "-.->" and edge[3] == ids[catch["Next"]]
            ]
            assert caught, f"{name}: Catch to {catch['Next']}"
            assert all(error in caught[0][2] for error in catch["ErrorEquals"])
    start = definition["StartAt"]
    assert f'    start(("start")) --> {ids[start]}' in docgen.workflow_doc(asl)


def test_a_changed_definition_makes_its_page_stale(tmp_path: Path) -> None:
    asl = ASL_FILES[0]
    definition = json.loads(asl.read_text())
    first = definition["StartAt"]
    definition["States"][first]["Comment"] = "a step an operator has not seen"
    changed = tmp_path / asl.name
    changed.write_text(json.dumps(definition))
    assert docgen.workflow_doc(changed) != docgen.workflow_doc(asl)
    assert "a step an operator has not seen" in docgen.workflow_doc(changed)


def test_labels_cannot_break_the_mermaid_syntax(tmp_path: Path) -> None:
    asl = tmp_path / "odd.asl.json"
    asl.write_text(
        json.dumps(
            {
                "StartAt": 'A "quoted" <state>',
                "States": {
                    'A "quoted" <state>': {
                        "Type": "Choice",
                        "Choices": [{"Condition": '{% $x > 1 and $y = "|" %}', "Next": "Done"}],
                        "Default": "Done",
                    },
                    "Done": {"Type": "Succeed"},
                },
            }
        )
    )
    names, edges = _diagram(docgen.workflow_doc(asl))
    assert sorted(names.values()) == ['A "quoted" #lt;state#gt;', "Done"]
    assert ("s0", "-->", "$x #gt; 1 and $y = #quot;|#quot;", "s1") in edges
