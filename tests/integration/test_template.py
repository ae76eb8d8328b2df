"""template.yaml: lints clean, points at code and definitions that exist, and agrees with the code: handlers,
the API, state machines, alarms, the table (each function's triggers and grants: test_template_functions)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest
from autopilot.api.routes import openapi_document
from autopilot.settings import (
    ApiSettings,
    ReconcilerSettings,
    RecordOutcomeSettings,
)
from cfnlint.api import lint_file

from tests.integration.template_support import RESOURCES, ROOT, TEMPLATE, of_type


def test_cfn_lint_passes() -> None:
    matches = lint_file(ROOT / "template.yaml")
    assert [str(m) for m in matches] == []


@pytest.mark.parametrize(("name", "props"), of_type("AWS::Serverless::Function").items())
def test_every_function_handler_exists(name: str, props: dict[str, Any]) -> None:
    code = ROOT / props["CodeUri"]
    handler = props.get("Handler", TEMPLATE["Globals"]["Function"].get("Handler"))
    module, function = handler.rsplit(".", 1)
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


# Set by the Lambda runtime itself (a reserved name: a template may not set it).
LAMBDA_RUNTIME_VARIABLES = {"AWS_REGION"}


def test_the_api_function_gets_every_setting_it_needs() -> None:
    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]) | LAMBDA_RUNTIME_VARIABLES
    environment |= set(of_type("AWS::Serverless::Function")["ApiFunction"]["Environment"]["Variables"])
    needed = {field.alias for field in ApiSettings.model_fields.values()}
    assert needed <= environment, needed - environment


def test_sns_topics_let_their_publishers_in() -> None:
    policies = of_type("AWS::SNS::TopicPolicy")
    principals = {
        (str(p["Topics"][0]), s["Principal"]["Service"])
        for p in policies.values()
        for s in p["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow"
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
        for d in a.get("Dimensions", [])
    )


def refs_to_every_state_machine() -> list[dict[str, str]]:
    return [{"Ref": name} for name in of_type("AWS::Serverless::StateMachine")]


def test_every_state_machines_unsuccessful_end_reaches_record_outcome() -> None:
    rule = of_type("AWS::Events::Rule")["ExecutionEndedRule"]
    pattern = rule["EventPattern"]

    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert sorted(pattern["detail"]["status"]) == ["ABORTED", "FAILED", "TIMED_OUT"]
    assert sorted(map(str, pattern["detail"]["stateMachineArn"])) == sorted(
        map(str, refs_to_every_state_machine())
    )
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["RecordOutcomeFunction", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["OutcomeDeadLetterQueue", "Arn"]}
    permission = of_type("AWS::Lambda::Permission")["ExecutionEndedRulePermission"]
    assert permission["SourceArn"] == {"Fn::GetAtt": ["ExecutionEndedRule", "Arn"]}
    alarms = of_type("AWS::CloudWatch::Alarm")
    assert any(
        d["Value"] == {"Fn::GetAtt": ["OutcomeDeadLetterQueue", "QueueName"]}
        for a in alarms.values()
        for d in a.get("Dimensions", [])
    )


def test_the_reconciler_runs_on_the_documented_schedule() -> None:
    function = of_type("AWS::Serverless::Function")["ReconcilerFunction"]
    (event,) = function["Events"].values()

    assert event["Type"] == "Schedule"
    assert event["Properties"]["Schedule"] == {"Ref": "ReconcileScheduleExpression"}
    assert TEMPLATE["Parameters"]["ReconcileScheduleExpression"]["Default"] == "rate(5 minutes)"
    # longer than the API's timeout, within which it starts the execution it recorded
    assert int(TEMPLATE["Parameters"]["ReconcileGraceSeconds"]["MinValue"]) > int(
        TEMPLATE["Globals"]["Function"]["Timeout"]
    )


@pytest.mark.parametrize("metric", ["ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"])
def test_every_state_machine_has_an_alarm_on(metric: str) -> None:
    def watches(alarm: dict[str, Any]) -> bool:
        names = [
            m.get("MetricStat", {}).get("Metric", {}).get("MetricName") for m in alarm.get("Metrics", [])
        ]
        return metric in names

    alarms = [a for a in of_type("AWS::CloudWatch::Alarm").values() if watches(a)]

    (alarm,) = alarms
    watched = [
        d["Value"]
        for m in alarm["Metrics"]
        if "MetricStat" in m
        for d in m["MetricStat"]["Metric"]["Dimensions"]
        if d["Name"] == "StateMachineArn"
    ]
    assert sorted(map(str, watched)) == sorted(map(str, refs_to_every_state_machine()))
    assert all(
        m["MetricStat"]["Metric"]["Namespace"] == "AWS/States" for m in alarm["Metrics"] if "MetricStat" in m
    )
    (shown,) = [m for m in alarm["Metrics"] if m.get("ReturnData")]
    assert {m["Id"] for m in alarm["Metrics"] if "MetricStat" in m} <= set(
        re.findall(r"\w+", shown["Expression"])
    )
    assert alarm["AlarmActions"] == [{"Ref": "AlertsTopic"}]


@pytest.mark.parametrize(
    ("function", "settings"),
    [("RecordOutcomeFunction", RecordOutcomeSettings), ("ReconcilerFunction", ReconcilerSettings)],
)
def test_the_outcome_functions_get_every_setting_they_need(function: str, settings: type[Any]) -> None:
    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(
        of_type("AWS::Serverless::Function")[function].get("Environment", {}).get("Variables", {})
    )
    needed = {field.alias for field in settings.model_fields.values()}
    assert needed <= environment, needed - environment


# ------------------------------------------------------------------ least privilege (template side)


def test_the_state_table_outlives_the_stack() -> None:
    table = RESOURCES["StateTable"]
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")


def dynamodb_actions(policy: Any) -> list[str]:
    if not isinstance(policy, dict) or "Statement" not in policy:
        return []
    actions: list[str] = []
    for statement in policy["Statement"]:
        listed = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        actions += [a for a in listed if a.startswith("dynamodb:")]
    return actions


@pytest.mark.parametrize(("name", "props"), of_type("AWS::Serverless::Function").items())
def test_functions_name_each_dynamodb_action(name: str, props: dict[str, Any]) -> None:
    policies = props.get("Policies") or []
    templates = [next(iter(p)) for p in policies if isinstance(p, dict) and "Statement" not in p]
    assert not [t for t in templates if t.startswith("DynamoDB")], f"{name}: SAM DynamoDB policy template"
    actions = [a for p in policies for a in dynamodb_actions(p)]
    assert not [a for a in actions if "*" in a], f"{name}: wildcard DynamoDB action"


def test_the_api_gets_its_authorization_parameters() -> None:
    variables = of_type("AWS::Serverless::Function")["ApiFunction"]["Environment"]["Variables"]
    parameters = TEMPLATE["Parameters"]

    assert variables["EXECUTION_ROLE_NAME_PATTERNS"] == {"Ref": "ExecutionRoleNamePatterns"}
    assert variables["ADMIN_PRINCIPAL_ARNS"] == {"Ref": "AdminPrincipalArns"}
    assert parameters["ExecutionRoleNamePatterns"]["Default"] == "*HyperPod*,*hyperpod*"
    assert parameters["AdminPrincipalArns"]["Default"] == ""
    for name, value in [("ExecutionRoleNamePatterns", "*HyperPod*,sagemaker-hyperpod-?"),
                        ("AdminPrincipalArns", "arn:aws:iam::1:role/a,arn:aws:sts::1:assumed-role/b/c"),
                        ("AdminPrincipalArns", "")]:  # fmt: skip
        assert re.fullmatch(parameters[name]["AllowedPattern"], value), (name, value)
    assert not re.fullmatch(parameters["AdminPrincipalArns"]["AllowedPattern"], "alice")


def test_the_api_stage_logs_every_request_as_json_and_throttles() -> None:
    api = of_type("AWS::Serverless::Api")["AutopilotApi"]
    log_setting = api["AccessLogSetting"]

    assert log_setting["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    fields = json.loads(log_setting["Format"])
    assert {"requestId", "userArn", "httpMethod", "resourcePath", "status", "responseLatency"} <= set(fields)
    assert fields["userArn"] == "$context.identity.userArn"  # the SigV4 caller, for authorization audits
    assert RESOURCES["ApiAccessLogGroup"]["Properties"]["RetentionInDays"]
    (setting,) = api["MethodSettings"]
    assert (setting["ResourcePath"], setting["HttpMethod"]) == ("/*", "*")
    assert setting["ThrottlingRateLimit"] == {"Ref": "ApiThrottlingRateLimit"}
    assert setting["ThrottlingBurstLimit"] == {"Ref": "ApiThrottlingBurstLimit"}
    parameters = TEMPLATE["Parameters"]
    assert (
        0
        < int(parameters["ApiThrottlingRateLimit"]["Default"])
        <= int(parameters["ApiThrottlingBurstLimit"]["Default"])
    )
    # API Gateway writes logs only with the account's CloudWatch role, set before the stage exists when
    # the stack sets it (a conditional reference: a DependsOn cannot name a conditional resource)
    assert api["Tags"]["autopilot:apigateway-account"]["Fn::If"][:2] == [
        "ManagesApiGatewayAccount",
        {"Ref": "ApiGatewayAccount"},
    ]
    assert RESOURCES["ApiGatewayAccount"]["Condition"] == "ManagesApiGatewayAccount"
    assert RESOURCES["ApiGatewayAccount"]["Properties"]["CloudWatchRoleArn"] == {
        "Fn::GetAtt": ["ApiGatewayLogsRole", "Arn"]
    }
