"""template.yaml: lints clean, points at code and definitions that exist, and agrees with the code."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from autopilot.api.routes import openapi_document
from autopilot.emitted_events import HEALING_RESUMED, SOURCE
from autopilot.logic import budget_alerts
from autopilot.models.cost_allocation import CostTagKeys, parse_cost_tag_keys
from autopilot.settings import (
    ApiSettings,
    BudgetAlertsSettings,
    CostTaggerSettings,
    HealingSettings,
    HealingSweepSettings,
    ReconcilerSettings,
    RecordOutcomeSettings,
    SessionGuardSettings,
    SpendMeterSettings,
)
from cfnlint.api import lint_file
from moto.events.models import EventPattern
from samtranslator.policy_template_processor.processor import (  # type: ignore[import-untyped]
    PolicyTemplatesProcessor,
)

from sandbox.emulator.deploy import load_template
from sandbox.emulator.lambda_runtime import LambdaContext
from sandbox.harness.stack import deployed
from tests.samples import load_event

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == kind}


_SAM_POLICY_TEMPLATES = PolicyTemplatesProcessor(PolicyTemplatesProcessor.get_default_policy_templates_json())


def policy_of(props: dict[str, Any]) -> dict[str, Any]:
    """Every statement of a function's or state machine's Policies, a SAM policy template (the
    template's short form for one sns:Publish, events:PutEvents…) as the SAM transform expands it."""
    statements: list[dict[str, Any]] = []
    for entry in props["Policies"]:
        if "Statement" in entry:
            statements += entry["Statement"]
        else:
            ((name, parameters),) = entry.items()
            statements += _SAM_POLICY_TEMPLATES.convert(name, parameters)["Statement"]
    return {"Statement": statements}


def _sam_policy_resource(template: str, **parameters: Any) -> Any:
    (statement,) = _SAM_POLICY_TEMPLATES.convert(template, parameters)["Statement"]
    return statement["Resource"]


ALERTS_TOPIC = _sam_policy_resource(
    "SNSPublishMessagePolicy", TopicName={"Fn::GetAtt": ["AlertsTopic", "TopicName"]}
)
DEFAULT_BUS = _sam_policy_resource("EventBridgePutEventsPolicy", EventBusName="default")


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


# ------------------------------------------------------------------ session guard


def test_session_guard_runs_on_cloudtrail_start_session_and_on_its_schedule() -> None:
    rule = of_type("AWS::Events::Rule")["SessionGuardRule"]
    function = of_type("AWS::Serverless::Function")["SessionGuardFunction"]
    parameters = TEMPLATE["Parameters"]

    # the pattern docs/AWS-FACTS give for StartSession through a trail
    assert rule["EventPattern"] == {
        "source": ["aws.ssm"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {"eventSource": ["ssm.amazonaws.com"], "eventName": ["StartSession"]},
    }
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["SessionGuardFunction", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["SessionGuardDeadLetterQueue", "Arn"]}
    assert function["DeadLetterQueue"]["TargetArn"] == {"Fn::GetAtt": ["SessionGuardDeadLetterQueue", "Arn"]}
    assert any(
        d["Value"] == {"Fn::GetAtt": ["SessionGuardDeadLetterQueue", "QueueName"]}
        for a in of_type("AWS::CloudWatch::Alarm").values()
        if a.get("AlarmActions") == [{"Ref": "AlertsTopic"}]
        for d in a.get("Dimensions", [])
    )
    (event,) = function["Events"].values()
    assert event["Properties"]["Schedule"] == {"Ref": "SessionGuardScheduleExpression"}
    assert parameters["SessionGuardScheduleExpression"]["Default"] == "rate(5 minutes)"
    assert parameters["MaxSessionsPerUser"]["Default"] == 2
    assert parameters["ForbiddenRunAsUsers"]["Default"] == "root,ssm-user"
    for value in ("root,ssm-user", "", "ec2-user", "root,ssm-user,admin_1"):
        assert re.fullmatch(parameters["ForbiddenRunAsUsers"]["AllowedPattern"], value), value
    assert not re.fullmatch(parameters["ForbiddenRunAsUsers"]["AllowedPattern"], "root, ssm-user")

    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"])
    needed = {field.alias for field in SessionGuardSettings.model_fields.values()}
    assert needed <= environment, needed - environment


def test_session_guard_hears_the_assume_role_records_that_pass_a_run_as_session_tag() -> None:
    rule = of_type("AWS::Events::Rule")["SessionTagsRule"]
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["SessionGuardFunction", "Arn"]}
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": ["SessionGuardDeadLetterQueue", "Arn"]}
    assert any(
        p["SourceArn"] == {"Fn::GetAtt": ["SessionTagsRule", "Arn"]}
        for p in of_type("AWS::Lambda::Permission").values()
    )
    (statement,) = of_type("AWS::SQS::QueuePolicy")["SessionGuardDeadLetterQueuePolicy"]["PolicyDocument"][
        "Statement"
    ]
    assert {"Fn::GetAtt": ["SessionTagsRule", "Arn"]} in statement["Condition"]["ArnEquals"]["aws:SourceArn"]

    pattern = EventPattern(None, rule["EventPattern"])
    record = load_event("ssm/assume_role_run_as_tag.json")
    saml = {**record["detail"], "eventName": "AssumeRoleWithSAML"}
    saml["requestParameters"] = {"principalTags": {"SSMSessionRunAs": "ann"}, "roleSessionName": "ann"}
    chained = {
        **record["detail"],
        "requestParameters": {"incomingTransitiveTags": {"SSMSessionRunAs": "ann"}},
    }
    untagged = {**record["detail"], "requestParameters": {"tags": [{"key": "team", "value": "ml"}]}}
    assert pattern.matches_event({**record, "detail": saml})
    assert pattern.matches_event({**record, "detail": chained})
    assert not pattern.matches_event({**record, "detail": untagged})
    assert not pattern.matches_event({**record, "detail": {**saml, "eventSource": "ssm.amazonaws.com"}})
    # AssumeRole's own Tags are an array of {key, value}: moto's matcher does not look inside such
    # arrays, so that route is unverified (docs/sandbox.md); the pattern names it for AWS.
    assert rule["EventPattern"]["detail"]["$or"][0] == {
        "requestParameters": {"tags": {"key": ["SSMSessionRunAs"]}}
    }


def test_session_guard_terminates_only_sessions_and_reads_only_tags() -> None:
    policy = policy_of(of_type("AWS::Serverless::Function")["SessionGuardFunction"])
    grants = {
        action: statement["Resource"]
        for statement in policy["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }

    assert grants["ssm:TerminateSession"] == {
        "Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:session/*"
    }
    assert grants["ssm:DescribeSessions"] == "*"  # no resource-level permissions exist for it
    assert grants["sns:Publish"] == ALERTS_TOPIC
    assert set(grants) == {
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "ssm:DescribeSessions",
        "ssm:TerminateSession",
        "iam:ListUserTags",
        "iam:ListRoleTags",
        "sns:Publish",
        "events:PutEvents",
    }


# ------------------------------------------------------------------ spend meter


def test_spend_meter_runs_every_spend_meter_minutes_with_least_privilege() -> None:
    function = of_type("AWS::Serverless::Function")["SpendMeterFunction"]
    assert TEMPLATE["Parameters"]["SpendMeterMinutes"]["Default"] == 15
    (event,) = function["Events"].values()
    assert event["Type"] == "Schedule"
    assert event["Properties"]["Schedule"] == {"Fn::Sub": "rate(${SpendMeterMinutes} minutes)"}

    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"]) | {"AWS_REGION"}  # Lambda sets the region
    needed = {field.alias for field in SpendMeterSettings.model_fields.values()}
    assert needed <= environment, needed - environment

    policy = policy_of(function)
    grants = {
        action: statement["Resource"]
        for statement in policy["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert grants["pricing:GetProducts"] == "*"  # the Price List API has no resource-level permissions
    assert grants["sns:Publish"] == ALERTS_TOPIC
    # metrics are embedded in the log (EMF): no cloudwatch:PutMetricData
    assert set(grants) == {
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "sagemaker:ListClusterNodes",
        "pricing:GetProducts",
        "sns:Publish",
    }


def test_cluster_events_start_repairs_with_the_healing_parameters_and_least_privilege() -> None:
    parameters = TEMPLATE["Parameters"]
    defaults = {name: parameters[name]["Default"] for name in ("MaxUnhealthyPercent", "BreakerWindowMinutes")}
    assert defaults == {"MaxUnhealthyPercent": 20, "BreakerWindowMinutes": 10}
    assert parameters["AllowLoginReplace"]["Default"] == "false"
    function = of_type("AWS::Serverless::Function")["ClusterEventsFunction"]
    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"])
    needed = {field.alias for field in HealingSettings.model_fields.values()}
    assert needed <= environment, needed - environment

    policy = policy_of(function)
    grants: dict[str, list[Any]] = {}
    for statement in policy["Statement"]:
        actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        for action in actions:
            grants.setdefault(action, []).append(statement["Resource"])
    repairs = {"Fn::GetAtt": ["ReplaceNodeStateMachine", "Name"]}
    assert grants["states:StartExecution"] == [
        _sam_policy_resource("StepFunctionsExecutionPolicy", StateMachineName=repairs)
    ]
    assert grants["sns:Publish"] == [ALERTS_TOPIC]
    provisioning_parameters = "arn:${AWS::Partition}:s3:::*/provisioning_parameters.json"
    assert grants["s3:GetObject"] == [{"Fn::Sub": provisioning_parameters}]
    # SageMaker: reads only; ListClusterNodes for the launch watcher (the nodes a scale-up left in Failure)
    sagemaker = [a for a in grants if a.startswith("sagemaker:") and not a.startswith("sagemaker:Describe")]
    assert sagemaker == ["sagemaker:ListClusterNodes"]


# ------------------------------------------------------------------ cost tags


def _actions(statement: dict[str, Any]) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else list(statement["Action"])


def _grants(policy: dict[str, Any]) -> dict[str, Any]:
    return {
        action: statement["Resource"] for statement in policy["Statement"] for action in _actions(statement)
    }


def test_cost_tagger_runs_on_its_schedule_with_its_settings() -> None:
    function = of_type("AWS::Serverless::Function")["CostTaggerFunction"]
    parameters = TEMPLATE["Parameters"]
    (event,) = function["Events"].values()
    assert event["Properties"]["Schedule"] == {"Ref": "CostTagScheduleExpression"}
    assert parameters["CostTagScheduleExpression"]["Default"] == "rate(1 hour)"
    assert parameters["DefaultMonthlyBudgetUsd"]["Default"] == 0
    # the default spells the default keys; the pattern lets through what the settings accept
    assert parse_cost_tag_keys(parameters["CostTagKeys"]["Default"]) == CostTagKeys()
    pattern = parameters["CostTagKeys"]["AllowedPattern"]
    for value in (
        parameters["CostTagKeys"]["Default"],
        "",
        "cost-center=CostCenter",
        "owner=Owner,project=Team",
    ):
        assert re.fullmatch(pattern, value), value
        parse_cost_tag_keys(value)
    for value in ("team=Team", "owner", "owner=a,"):
        assert not re.fullmatch(pattern, value), value

    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"])
    needed = {field.alias for field in CostTaggerSettings.model_fields.values()}
    assert needed <= environment, needed - environment
    api = of_type("AWS::Serverless::Function")["ApiFunction"]["Environment"]["Variables"]
    assert api["COST_TAG_KEYS"] == {"Ref": "CostTagKeys"}
    assert api["DEFAULT_MONTHLY_BUDGET_USD"] == {"Ref": "DefaultMonthlyBudgetUsd"}


@pytest.mark.parametrize(
    ("machine", "functions"),
    [
        (
            "CreateClusterStateMachine",
            ["CostTaggerFunction", "DiagnoseFailureFunction", "LoginTargetsFunction"],
        ),
        ("CleanupClusterStateMachine", ["CostTaggerFunction", "LoginTargetsFunction"]),
        ("ReplaceNodeStateMachine", ["DiagnoseFailureFunction", "AgentFunction", "LoginTargetsFunction"]),
    ],
)
def test_the_workflows_may_invoke_their_functions_and_nothing_else(
    machine: str, functions: list[str]
) -> None:
    props = of_type("AWS::Serverless::StateMachine")[machine]
    arns = [{"Fn::GetAtt": [function, "Arn"]} for function in functions]
    for function, arn in zip(functions, arns, strict=True):
        assert props["DefinitionSubstitutions"][f"{function}Arn"] == arn
    policy = policy_of(props)
    granted = [
        resource
        for statement in policy["Statement"]
        if "lambda:InvokeFunction" in _actions(statement)
        for resource in (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
    ]
    assert granted == arns


def test_the_failure_diagnosis_reads_only_hyperpods_lifecycle_logs() -> None:
    policy = policy_of(of_type("AWS::Serverless::Function")["DiagnoseFailureFunction"])
    logs = "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/sagemaker/Clusters/*"
    clusters = "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${AWS::AccountId}:cluster/*"
    assert _grants(policy) == {
        "logs:DescribeLogStreams": {"Fn::Sub": logs},
        "logs:GetLogEvents": {"Fn::Sub": logs + ":log-stream:LifecycleConfig/*"},
        "sagemaker:DescribeCluster": {"Fn::Sub": clusters},
        "sagemaker:ListClusterEvents": {"Fn::Sub": clusters},
    }


def test_cost_tagger_tags_only_the_resource_types_it_tags() -> None:
    policy = policy_of(of_type("AWS::Serverless::Function")["CostTaggerFunction"])
    grants = _grants(policy)
    account = "arn:${AWS::Partition}:%s:${AWS::Region}:${AWS::AccountId}:%s"

    assert grants["sagemaker:AddTags"] == {"Fn::Sub": account % ("sagemaker", "cluster/*")}
    assert grants["s3:PutBucketTagging"] == {"Fn::Sub": "arn:${AWS::Partition}:s3:::*"}
    assert grants["fsx:TagResource"] == {"Fn::Sub": account % ("fsx", "file-system/*")}
    assert grants["ec2:CreateTags"] == [
        {"Fn::Sub": account % ("ec2", "security-group/*")},
        {"Fn::Sub": account % ("ec2", "network-interface/*")},
    ]
    assert grants["budgets:ModifyBudget"] == {
        "Fn::Sub": "arn:${AWS::Partition}:budgets::${AWS::AccountId}:budget/hyperpod-project.*"
    }
    # "*" only where the action takes no resource (EC2's and FSx's Describe calls)
    assert sorted(a for a, r in grants.items() if r == "*") == [
        "ec2:DescribeNetworkInterfaces",
        "ec2:DescribeSecurityGroups",
        "fsx:DescribeFileSystems",
    ]


def test_budget_alerts_hear_aws_budgets_with_least_privilege() -> None:
    function = of_type("AWS::Serverless::Function")["BudgetAlertsFunction"]
    events = function["Events"]
    assert events["BudgetNotification"] == {
        "Type": "SNS",
        "Properties": {"Topic": {"Ref": "BudgetNotificationsTopic"}},
    }
    # what a failure left undone (a refused scale-down, an unpublished alert) is retried on a schedule
    assert (
        events["RetryUnfinished"]["Properties"]["Schedule"] == f"rate({budget_alerts.RETRY_MINUTES} minutes)"
    )
    assert set(events) == {"BudgetNotification", "RetryUnfinished"}
    (statement, deny) = RESOURCES["BudgetNotificationsTopicPolicy"]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    assert statement["Principal"] == {"Service": "budgets.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # everyone else (a principal of the account allowed sns:Publish on "*") is refused (issue 20)
    assert deny["Effect"] == "Deny"
    assert deny["Principal"] == "*"
    assert deny["Condition"] == {"StringNotEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # every cluster budget notifies it (the API puts it in the workflow input as the SNS subscriber)
    api = of_type("AWS::Serverless::Function")["ApiFunction"]["Environment"]["Variables"]
    assert api["BUDGET_NOTIFICATIONS_TOPIC_ARN"] == {"Ref": "BudgetNotificationsTopic"}

    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"])
    needed = {field.alias for field in BudgetAlertsSettings.model_fields.values()}
    assert needed <= environment, needed - environment

    policy = policy_of(function)
    grants = {
        action: statement["Resource"]
        for statement in policy["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert set(grants) == {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "budgets:ViewBudget",
        "sagemaker:DescribeCluster",
        "sagemaker:UpdateCluster",
        "iam:PassRole",
        "sns:Publish",
        "events:PutEvents",
    }
    assert grants["sns:Publish"] == ALERTS_TOPIC
    assert grants["dynamodb:Query"] == {"Fn::Sub": "${StateTable.Arn}/index/by-kind"}
    assert grants["budgets:ViewBudget"] == {
        "Fn::Sub": "arn:${AWS::Partition}:budgets::${AWS::AccountId}:budget/hyperpod-*"
    }
    # SNS invokes asynchronously: what fails after Lambda's retries is kept and alarmed
    assert function["DeadLetterQueue"]["TargetArn"] == {"Fn::GetAtt": ["BudgetAlertsDeadLetterQueue", "Arn"]}
    alarm = RESOURCES["BudgetAlertsDeadLetterAlarm"]["Properties"]
    assert alarm["AlarmActions"] == [{"Ref": "AlertsTopic"}]


# ------------------------------------------------------------------ healing sweep


def test_the_healing_sweep_runs_on_its_schedule_and_on_healing_resumed() -> None:
    function = of_type("AWS::Serverless::Function")["HealingSweepFunction"]
    events = function["Events"]

    assert events["Sweep"]["Properties"]["Schedule"] == {"Ref": "HealingSweepScheduleExpression"}
    resumed = events["Resumed"]
    assert resumed["Type"] == "EventBridgeRule"
    assert resumed["Properties"]["Pattern"] == {"source": [SOURCE], "detail-type": [HEALING_RESUMED]}
    # no longer than the schedule takes to sweep the cluster anyway
    assert resumed["Properties"]["RetryPolicy"]["MaximumEventAgeInSeconds"] <= 3600
    environment = set(TEMPLATE["Globals"]["Function"]["Environment"]["Variables"])
    environment |= set(function["Environment"]["Variables"])
    settings = (HealingSettings, HealingSweepSettings)
    needed = {field.alias for model in settings for field in model.model_fields.values()}
    assert needed <= environment, needed - environment


def test_the_api_announces_a_resume_and_sweeps_nothing_itself() -> None:
    function = of_type("AWS::Serverless::Function")["ApiFunction"]
    policy = policy_of(function)
    grants = _grants(policy)

    assert grants["events:PutEvents"] == DEFAULT_BUS
    # the sweep's alert (a breaker trip) and its stuck-node deadline are HealingSweepFunction's
    assert "sns:Publish" not in grants
    assert "states:StopExecution" not in grants
    # (AGENT_POLL_SECONDS is the API's own setting too: GET /clusters/{name} shows the agent's status)
    stuck = {f.alias for f in HealingSweepSettings.model_fields.values()} - {
        f.alias for f in ApiSettings.model_fields.values()
    }
    assert stuck
    assert not stuck & set(function["Environment"]["Variables"])


def test_every_function_logs_to_its_own_group_kept_log_retention_days() -> None:
    # issue 20: the functions' /aws/lambda/<name> groups, made by Lambda, never expired
    assert TEMPLATE["Parameters"]["LogRetentionDays"]["Default"] == 30
    for name, props in of_type("AWS::Serverless::Function").items():
        group = props["LoggingConfig"]["LogGroup"]["Ref"]
        assert RESOURCES[group]["Type"] == "AWS::Logs::LogGroup", name
        assert RESOURCES[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
    log_groups = of_type("AWS::Logs::LogGroup")
    assert all("RetentionInDays" in props for props in log_groups.values())


def test_the_deployed_functions_log_where_their_groups_keep_logs_30_days(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(execute=False) as stack:
        groups = stack.client("logs").describe_log_groups()["logGroups"]
        retention = {g["logGroupName"]: g.get("retentionInDays") for g in groups}
        for name in of_type("AWS::Serverless::Function"):
            spec = stack.stack.function(name)  # moto's GetFunction leaves LoggingConfig out
            assert spec.log_group_name == stack.stack.physical_id(f"{name}LogGroup"), name
            assert retention[spec.log_group_name] == 30, name
            # the sandbox's runtime tells the handler that group, as Lambda does
            assert LambdaContext(spec, "request", 0.0).log_group_name == spec.log_group_name, name
