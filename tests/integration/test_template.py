"""template.yaml: lints clean, points at code and definitions that exist, and agrees with the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from autopilot.api.routes import openapi_document
from autopilot.settings import ApiSettings
from cfnlint.api import lint_file

from sandbox.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == kind}


def test_cfn_lint_passes() -> None:
    matches = lint_file(ROOT / "template.yaml")
    assert [str(m) for m in matches] == []


@pytest.mark.parametrize(("name", "props"), of_type("AWS::Serverless::Function").items())
def test_every_function_handler_exists(name: str, props: dict[str, Any]) -> None:
    code = ROOT / props["CodeUri"]
    module, function = props["Handler"].rsplit(".", 1)
    source = code / f"{module.replace('.', '/')}.py"
    assert source.is_file(), f"{name}: {source} is missing"
    defined = {n.name for n in ast.parse(source.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert function in defined, f"{name}: {source} has no {function}()"


@pytest.mark.parametrize(("name", "props"), of_type("AWS::Serverless::StateMachine").items())
def test_definition_substitutions_cover_the_definition(name: str, props: dict[str, Any]) -> None:
    text = (ROOT / props["DefinitionUri"]).read_text()
    used = set(re.findall(r"\$\{([^}]+)\}", text))
    provided = set(props.get("DefinitionSubstitutions", {}))
    assert used == provided, f"{name}: missing {used - provided}, unused {provided - used}"
    assert "Partition" in provided, f"{name}: ARNs must be built with ${{AWS::Partition}}"


def test_api_events_match_the_openapi_routes() -> None:
    events = of_type("AWS::Serverless::Function")["ApiFunction"]["Events"]
    routes = {(e["Properties"]["Path"], e["Properties"]["Method"].upper()) for e in events.values()}
    documented = {
        (path, method.upper()) for path, ops in openapi_document()["paths"].items() for method in ops
    }
    assert routes == documented | {("/openapi.json", "GET")}
    assert all(e["Type"] == "Api" for e in events.values())


def test_the_api_uses_iam_authorization() -> None:
    api = of_type("AWS::Serverless::Api")["AutopilotApi"]
    assert api["Auth"]["DefaultAuthorizer"] == "AWS_IAM"


def test_the_api_function_gets_every_setting_it_needs() -> None:
    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(of_type("AWS::Serverless::Function")["ApiFunction"]["Environment"]["Variables"])
    needed = {field.alias for field in ApiSettings.model_fields.values()}
    assert needed <= environment, needed - environment


def test_sns_topics_let_their_publishers_in() -> None:
    policies = of_type("AWS::SNS::TopicPolicy")
    principals = {
        (str(p["Topics"][0]), s["Principal"]["Service"])
        for p in policies.values()
        for s in p["PolicyDocument"]["Statement"]
    }
    assert ("{'Ref': 'AlertsTopic'}", "budgets.amazonaws.com") in principals
    assert ("{'Ref': 'AlertsTopic'}", "events.amazonaws.com") in principals
    assert ("{'Ref': 'NotificationsTopic'}", "events.amazonaws.com") in principals


def test_operation_event_rules_have_a_dead_letter_queue_with_an_alarm() -> None:
    rules = {
        n: p
        for n, p in of_type("AWS::Events::Rule").items()
        if n in ("OperationEventsRule", "FailedOperationsRule")
    }
    assert rules
    assert all(t["DeadLetterConfig"] for p in rules.values() for t in p["Targets"])
    alarms = of_type("AWS::CloudWatch::Alarm")
    assert any(
        d["Value"] == {"Fn::GetAtt": ["OperationEventsDeadLetterQueue", "QueueName"]}
        for a in alarms.values()
        for d in a["Dimensions"]
    )
