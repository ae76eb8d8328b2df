"""The operator docs stay true to the code: every template parameter documented with its default, the
generated parameter table current, the example caller policies true to the API, local links alive."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from sandbox.apps import docgen

ROOT = docgen.ROOT
PARAMETERS = docgen.template_parameters()
OPENAPI = json.loads((ROOT / "docs" / "openapi.json").read_text())
POLICIES = {
    "read-only": ROOT / "docs" / "caller-policy-read-only.json",
    "operator": ROOT / "docs" / "caller-policy-operator.json",
}
_MUTATING = {"post", "put", "delete", "patch"}
# POST /validate changes nothing: a read-only caller may check a config against the stack's rules
_READ_ONLY_POSTS = {("post", "/validate")}


def _documented_default(parameter: dict[str, Any]) -> str:
    default = parameter.get("Default")
    return '""' if default == "" else str(default)


def test_deploy_parameter_table_is_current() -> None:
    current = docgen.DEPLOY_DOC.read_text()
    assert current == docgen.deploy_doc(current), "docs/deploy.md's parameter table is stale: run make docs"


def test_operations_failure_catalog_is_current() -> None:
    current = docgen.OPERATIONS_DOC.read_text()
    assert current == docgen.operations_doc(current), (
        "docs/operations.md's failure catalog is stale: run make docs"
    )


def test_the_failure_catalog_table_has_a_row_per_catalog_entry(tmp_path: Path) -> None:
    entries = json.loads(docgen.CATALOG.read_text())["entries"]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|", docgen.catalog_table(), re.MULTILINE)
    assert rows == [entry["category"] for entry in entries]
    # an entry added to the data is a row more, with no code changed
    added = {
        **entries[0],
        "category": "new-cause",
        "examples": [{"line": "a | b", "source": "https://x.example"}],
    }
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"entries": [*entries, added]}))
    assert docgen.catalog_table(catalog).splitlines()[-1].startswith("| `new-cause` |")
    assert "`a \\| b`" in docgen.catalog_table(catalog)


def test_deploy_parameter_table_has_every_parameter_with_its_default() -> None:
    rows = {
        match.group(1): match.group(2)
        for match in re.finditer(r"^\| `(\w+)` \| (.*?) \|", docgen.parameter_table(), re.MULTILINE)
    }
    assert list(rows) == list(PARAMETERS)
    for name, parameter in PARAMETERS.items():
        assert rows[name].strip("`") == _documented_default(parameter), name


@pytest.mark.parametrize("name", list(PARAMETERS))
def test_operations_guide_explains_every_parameter_with_its_default(name: str) -> None:
    """The hand-written tables of docs/operations.md (what the parameter changes in practice)."""
    rows = re.findall(
        rf"^\| `{name}` \| (.*?) \|", (ROOT / "docs" / "operations.md").read_text(), re.MULTILINE
    )
    assert rows, f"docs/operations.md has no table row for {name}"
    assert rows[0].strip("`") == _documented_default(PARAMETERS[name]), (
        f"{name}: default in docs/operations.md"
    )


def _resources(policy: Path) -> list[str]:
    document = json.loads(policy.read_text())
    assert document["Version"] == "2012-10-17"
    resources: list[str] = []
    for statement in document["Statement"]:
        assert statement["Effect"] == "Allow"
        assert statement["Action"] == "execute-api:Invoke"
        resources += statement["Resource"]
    prefix = "arn:aws:execute-api:<region>:<account-id>:<api-id>/<stage>/"
    assert all(resource.startswith(prefix) for resource in resources)
    return [resource.removeprefix(prefix) for resource in resources]


def _allows(resources: list[str], method: str, path: str) -> bool:
    # an execute-api ARN names METHOD/path; IAM's * matches any characters, '/' included (as fnmatch)
    concrete = re.sub(r"\{[^}]+\}", "x", path).lstrip("/")
    return any(fnmatchcase(f"{method.upper()}/{concrete}", resource) for resource in resources)


_OPERATIONS = [
    (method, path)
    for path, methods in OPENAPI["paths"].items()
    for method in methods
    if method in _MUTATING | {"get"}
]


@pytest.mark.parametrize(("method", "path"), _OPERATIONS, ids=str)
def test_caller_policies_match_the_api(method: str, path: str) -> None:
    read_only, operator = _resources(POLICIES["read-only"]), _resources(POLICIES["operator"])
    reads = method == "get" or (method, path) in _READ_ONLY_POSTS
    assert _allows(read_only, method, path) == reads, "read-only: every read, nothing that changes a cluster"
    assert _allows(operator, method, path), "operator: every route"


def test_read_only_policy_cannot_change_anything() -> None:
    read_only = _resources(POLICIES["read-only"])
    for method in _MUTATING:
        for path in ("/clusters", "/clusters/x", "/clusters/x/nodes/y/replace", "/clusters/x/healing"):
            assert not _allows(read_only, method, path), f"{method} {path}"


_LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
    ids=lambda path: path.name,
)
def test_local_links_resolve(page: Path) -> None:
    for target, anchor in _LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        linked = page.parent / target if target else page
        assert linked.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name} links to {target}#{anchor}: no such heading"
