"""Generated documentation: one Mermaid diagram per workflow, the deploy parameter table and the
failure catalog of docs/operations.md.

`python -m sandbox.apps.docgen` (or `make docs`) writes docs/workflows/<name>.md from
statemachines/<name>.asl.json and the table between the markers in docs/deploy.md from template.yaml's
Parameters; `--check` writes nothing and exits 1 naming each stale file (tests/unit/
test_workflow_diagrams.py and test_docs.py make the same comparison), so a workflow or parameter change
cannot leave its documentation behind.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
STATEMACHINES = ROOT / "statemachines"
WORKFLOW_DOCS = ROOT / "docs" / "workflows"
TEMPLATE = ROOT / "template.yaml"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
TABLE_BEGIN = "<!-- parameters:begin (generated from template.yaml by `make docs`; do not edit) -->"
TABLE_END = "<!-- parameters:end -->"
# docs/operations.md's failure catalog, from the catalog's data (layers/autopilot/autopilot/diagnosis/).
OPERATIONS_DOC = ROOT / "docs" / "operations.md"
CATALOG = ROOT / "layers" / "autopilot" / "autopilot" / "diagnosis" / "catalog.json"
CATALOG_BEGIN = (
    "<!-- failure-catalog:begin (generated from diagnosis/catalog.json by `make docs`; do not edit) -->"
)
CATALOG_END = "<!-- failure-catalog:end -->"

# a Choice condition longer than this is cut on its edge; the state table below the diagram has it whole
EDGE_LABEL_CHARS = 48
_SHAPES = {
    "Choice": ("{", "}"),
    "Wait": ("{{", "}}"),
    "Pass": ("(", ")"),
    "Succeed": ("([", "])"),
    "Fail": ("([", "])"),
}


def _mermaid_text(text: str) -> str:
    # inside a quoted Mermaid label only these break the syntax or turn into HTML
    return text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def _condition(rule: dict[str, Any]) -> str:
    if "Condition" in rule:
        return str(rule["Condition"]).removeprefix("{%").removesuffix("%}").strip()
    # JSONPath rules (none today) have no one-line form: their variable names the test
    return str(rule.get("Variable", "rule"))


def _action(state: dict[str, Any]) -> str:
    resource = str(state.get("Resource", ""))
    return resource.split(":::", 1)[-1].removeprefix("aws-sdk:")


def _edges(state: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(target, label, arrow) of each transition: Next, Choice rules and Default, Catch by target."""
    for rule in state.get("Choices", []):
        condition = _condition(rule)
        if len(condition) > EDGE_LABEL_CHARS:
            condition = condition[: EDGE_LABEL_CHARS - 1] + "…"
        yield rule["Next"], condition, "-->"
    if "Default" in state:
        yield state["Default"], "default", "-->"
    if "Next" in state:
        yield state["Next"], "", "-->"
    catches: dict[str, list[str]] = {}
    for catch in state.get("Catch", []):
        catches.setdefault(catch["Next"], []).extend(catch["ErrorEquals"])
    for target, errors in catches.items():
        yield target, "catch " + ", ".join(dict.fromkeys(errors)), "-.->"


def _flowchart(definition: dict[str, Any]) -> list[str]:
    states: dict[str, dict[str, Any]] = definition["States"]
    ids = {name: f"s{index}" for index, name in enumerate(states)}
    lines = ["```mermaid", "flowchart TD", '    start(("start")) --> ' + ids[definition["StartAt"]]]
    for name, state in states.items():
        kind = state["Type"]
        label = _mermaid_text(name)
        if kind == "Task":
            label += "<br/>" + _mermaid_text(_action(state))
        opening, closing = _SHAPES.get(kind, ("[", "]"))
        lines.append(f'    {ids[name]}{opening}"{label}"{closing}')
    for name, state in states.items():
        for target, label, arrow in _edges(state):
            text = f'|"{_mermaid_text(label)}"|' if label else ""
            lines.append(f"    {ids[name]} {arrow}{text} {ids[target]}")
    succeeded = [ids[name] for name, state in states.items() if state["Type"] == "Succeed"]
    failed = [ids[name] for name, state in states.items() if state["Type"] == "Fail"]
    lines += [
        "    classDef succeed fill:#d4edda,stroke:#28a745",
        "    classDef fail fill:#f8d7da,stroke:#dc3545",
    ]
    if succeeded:
        lines.append(f"    class {','.join(succeeded)} succeed")
    if failed:
        lines.append(f"    class {','.join(failed)} fail")
    lines.append("```")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _state_table(definition: dict[str, Any]) -> list[str]:
    lines = ["| state | type | what it does | goes to |", "| --- | --- | --- | --- |"]
    for name, state in definition["States"].items():
        what = [f"`{_action(state)}`"] if "Resource" in state else []
        if "Comment" in state:
            what.append(state["Comment"])
        goes: list[str] = []
        for rule in state.get("Choices", []):
            goes.append(f"`{_condition(rule)}` → {rule['Next']}")
        if "Default" in state:
            goes.append(f"otherwise → {state['Default']}")
        if "Next" in state:
            goes.append(f"→ {state['Next']}")
        if state.get("End") or state["Type"] in ("Succeed", "Fail"):
            goes.append("end")
        for retry in state.get("Retry", []):
            goes.append(f"retry {', '.join(retry['ErrorEquals'])} (max {retry.get('MaxAttempts', 3)})")
        for catch in state.get("Catch", []):
            goes.append(f"catch {', '.join(catch['ErrorEquals'])} → {catch['Next']}")
        lines.append(
            f"| {_cell(name)} | {state['Type']} | {_cell(' '.join(what))} | {_cell('; '.join(goes))} |"
        )
    return lines


def workflow_doc(asl_path: Path) -> str:
    """The Markdown page of one state machine definition."""
    definition: dict[str, Any] = json.loads(asl_path.read_text())
    title = asl_path.name.removesuffix(".asl.json")
    lines = [
        f"# Workflow `{title}`",
        "",
        f"Generated from [`statemachines/{asl_path.name}`](../../statemachines/{asl_path.name}) by "
        "`make docs` (`python -m sandbox.apps.docgen`); do not edit: tests/unit/test_workflow_diagrams.py "
        "fails when it is stale.",
        "",
        definition.get("Comment", ""),
        "",
        "Solid arrows are `Next`, Choice rules (their JSONata condition, cut to fit) and `default`; "
        "dotted arrows are `Catch` (the errors caught). Retries are in the table.",
        "",
        *_flowchart(definition),
        "",
        *_state_table(definition),
        "",
    ]
    return "\n".join(lines)


class _TemplateLoader(yaml.SafeLoader):
    """template.yaml with its intrinsic tags (!Ref, !Sub ...) read as plain values."""


def _intrinsic(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)  # type: ignore[arg-type]


_TemplateLoader.add_multi_constructor("!", _intrinsic)


def template_parameters(template: Path = TEMPLATE) -> dict[str, dict[str, Any]]:
    """template.yaml's Parameters, in the template's order."""
    loaded: dict[str, Any] = yaml.load(template.read_text(), Loader=_TemplateLoader)  # noqa: S506
    parameters: dict[str, dict[str, Any]] = loaded["Parameters"]
    return parameters


def _default(parameter: dict[str, Any]) -> str:
    default = parameter.get("Default")
    return '""' if default == "" else f"`{default}`"


def _allowed(parameter: dict[str, Any]) -> str:
    limits = []
    if "AllowedValues" in parameter:
        limits.append(" \\| ".join(f"`{value}`" for value in parameter["AllowedValues"]))
    if "MinValue" in parameter and "MaxValue" in parameter:
        limits.append(f"{parameter['MinValue']} to {parameter['MaxValue']}")
    elif "MinValue" in parameter:
        limits.append(f"≥ {parameter['MinValue']}")
    elif "MaxValue" in parameter:
        limits.append(f"≤ {parameter['MaxValue']}")
    if "AllowedPattern" in parameter:
        limits.append(f"`{_cell(str(parameter['AllowedPattern']))}`")
    return "; ".join(limits)


def parameter_table(template: Path = TEMPLATE) -> str:
    """The Markdown table of every template parameter: default, allowed values, the template's words."""
    lines = ["| parameter | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for name, parameter in template_parameters(template).items():
        meaning = " ".join(str(parameter.get("Description", "")).split())
        lines.append(f"| `{name}` | {_default(parameter)} | {_allowed(parameter)} | {_cell(meaning)} |")
    return "\n".join(lines)


def deploy_doc(current: str, template: Path = TEMPLATE) -> str:
    """docs/deploy.md with the text between its parameter markers replaced by the generated table."""
    pattern = re.compile(re.escape(TABLE_BEGIN) + r".*?" + re.escape(TABLE_END), re.DOTALL)
    if not pattern.search(current):
        raise ValueError(f"{DEPLOY_DOC.name} has no {TABLE_BEGIN!r} ... {TABLE_END!r} block")
    table = f"{TABLE_BEGIN}\n{parameter_table(template)}\n{TABLE_END}"
    return pattern.sub(lambda _match: table, current)


def catalog_table(catalog: Path = CATALOG) -> str:
    """The Markdown table of the failure catalog: each cause, what it is, its fix, a line that shows it."""
    lines = [
        "| category | what happened | fix | recognised from, e.g. | source |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in json.loads(catalog.read_text(encoding="utf-8"))["entries"]:
        example = entry["examples"][0]
        source = str(example["source"])
        link = f"<{source}>" if source.startswith("https://") and " " not in source else _cell(source)
        line = _cell(str(example["line"])).replace("`", "'")  # inside a code span
        what, fix = _cell(entry["summary"]), _cell(entry["fix"])
        lines.append(f"| `{entry['category']}` | {what} | {fix} | `{line}` | {link} |")
    return "\n".join(lines)


def _replace_block(current: str, begin: str, end: str, body: str, name: str) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(current):
        raise ValueError(f"{name} has no {begin!r} ... {end!r} block")
    return pattern.sub(lambda _match: f"{begin}\n{body}\n{end}", current)


def operations_doc(current: str, catalog: Path = CATALOG) -> str:
    """docs/operations.md with the text between its failure-catalog markers replaced by the table."""
    return _replace_block(current, CATALOG_BEGIN, CATALOG_END, catalog_table(catalog), OPERATIONS_DOC.name)


def generated() -> dict[Path, str]:
    """Every generated file and the text it must hold."""
    files = {
        WORKFLOW_DOCS / (asl.name.removesuffix(".asl.json") + ".md"): workflow_doc(asl)
        for asl in sorted(STATEMACHINES.glob("*.asl.json"))
    }
    files[DEPLOY_DOC] = deploy_doc(DEPLOY_DOC.read_text())
    files[OPERATIONS_DOC] = operations_doc(OPERATIONS_DOC.read_text())
    return files


def _orphans(files: dict[Path, str]) -> list[Path]:
    """Workflow pages left behind by a removed state machine."""
    return [path for path in sorted(WORKFLOW_DOCS.glob("*.md")) if path not in files]


def stale() -> list[Path]:
    """Generated files whose committed text differs from what the sources give now (or are missing),
    and workflow pages of state machines that are gone."""
    files = generated()
    outdated = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
    return outdated + _orphans(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.apps.docgen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    args = parser.parse_args(argv)
    if args.check:
        outdated = stale()
        for path in outdated:
            print(f"stale: {path.relative_to(ROOT)} (run make docs)", file=sys.stderr)
        return 1 if outdated else 0
    WORKFLOW_DOCS.mkdir(parents=True, exist_ok=True)
    files = generated()
    for path in _orphans(files):
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
