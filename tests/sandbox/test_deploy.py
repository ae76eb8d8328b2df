"""Deploying SAM templates into moto: SAM's own transform, every resource type, intrinsics, loud errors,
the seams into moto's IAM (the real template: test_deploy_real.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from sandbox.emulator.deploy import Stack, TemplateError, deploy, load_template
from sandbox.emulator.deploy.intrinsics import NO_VALUE, Resolver
from sandbox.emulator.deploy.moto_iam import add_aws_managed_policies, versionless_policies_accepted
from sandbox.emulator.deploy.resource_providers.aws_lambda_function import check_environment_size
from sandbox.harness.core import MOCK_CONFIG, Sandbox
from tests.sandbox.deploy_support import _role_documents

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATE = FIXTURES / "template.yaml"
REGION = "us-east-1"


@pytest.fixture(scope="class")
def deployed() -> Iterator[Sandbox]:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=1) as sandbox:
        yield sandbox


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


def _deploy_tmp(tmp_path: Path, template: dict[str, Any], **parameters: Any) -> Stack:
    path = tmp_path / "template.yaml"
    path.write_text(yaml.safe_dump(template))
    with mock_aws(config=MOCK_CONFIG):
        return deploy(path, parameters=parameters)


def _fixture_with(tmp_path: Path, edit: Any) -> Path:
    """A copy of the fixture template (in the fixture dir's place, so CodeUris resolve) after ``edit``."""
    template = load_template(TEMPLATE)
    edit(template)
    path = FIXTURES / f"_tmp_{tmp_path.name}.json"
    path.write_text(json.dumps(template))
    return path


# --- every resource exists in moto ---------------------------------------------------------------
class TestFixtureStack:
    """One deployment of the fixture template, shared by the read-only checks (class-scoped)."""

    def test_table_is_created_with_schema_ttl_and_sse(self, deployed: Sandbox) -> None:
        table = deployed.client("dynamodb").describe_table(
            TableName=deployed.stack.physical_id("RecordsTable")
        )["Table"]
        assert table["TableName"] == "fixture-records-test"
        assert [k["AttributeName"] for k in table["KeySchema"]] == ["pk", "sk"]
        assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        ttl = deployed.client("dynamodb").describe_time_to_live(TableName="fixture-records-test")
        assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires"
        assert deployed.stack.arn("RecordsTable") == table["TableArn"]

    def test_queues_have_redrive_policy_and_queue_policy(self, deployed: Sandbox) -> None:
        sqs = deployed.client("sqs")
        attributes = sqs.get_queue_attributes(
            QueueUrl=deployed.stack.physical_id("WorkQueue"), AttributeNames=["All"]
        )["Attributes"]
        assert json.loads(attributes["RedrivePolicy"]) == {
            "deadLetterTargetArn": deployed.stack.arn("WorkDeadLetterQueue"),
            "maxReceiveCount": 2,
        }
        assert attributes["VisibilityTimeout"] == "60"
        assert json.loads(attributes["Policy"])["Statement"][0]["Action"] == "sqs:SendMessage"

    def test_topic_policy_and_subscriptions(self, deployed: Sandbox) -> None:
        sns = deployed.client("sns")
        topic = deployed.stack.arn("NotificationsTopic")
        policy = json.loads(sns.get_topic_attributes(TopicArn=topic)["Attributes"]["Policy"])
        assert policy["Statement"][0]["Principal"]["Service"] == [
            "events.amazonaws.com",
            "budgets.amazonaws.com",
        ]
        subscriptions = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
        assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [
            ("lambda", deployed.stack.arn("RecorderFunction"))
        ]

    def test_functions_exist_in_moto_lambda_with_env_layers_and_role(self, deployed: Sandbox) -> None:
        configuration = deployed.client("lambda").get_function(
            FunctionName=deployed.stack.physical_id("EchoFunction")
        )["Configuration"]
        assert configuration["Handler"] == "app.handler"
        assert configuration["Timeout"] == 5
        assert configuration["MemorySize"] == 256
        assert configuration["Environment"]["Variables"]["RECORDS_TABLE"] == "fixture-records-test"
        assert configuration["Environment"]["Variables"]["MODE"] == "sandbox"
        assert [layer["Arn"] for layer in configuration["Layers"]] == [
            deployed.stack.physical_id("FixtureLayer")
        ]
        assert configuration["Role"] == deployed.stack.arn("EchoFunctionRole")
        assert deployed.stack.function("EchoFunction").code_dir == FIXTURES / "functions" / "echo"
        assert deployed.stack.function("EchoFunction").layer_dirs == [FIXTURES / "layer"]

    def test_event_sources_become_rules_mappings_and_permissions(self, deployed: Sandbox) -> None:
        stack = deployed.stack
        mapping = deployed.client("lambda").get_event_source_mapping(
            UUID=stack.physical_id("WorkerFunctionWork")
        )
        assert mapping["EventSourceArn"] == stack.arn("WorkQueue")
        assert mapping["BatchSize"] == 3
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        events = deployed.client("events")
        rule = events.describe_rule(Name=stack.physical_id("RecorderFunctionNodeEvents"))
        assert json.loads(rule["EventPattern"]) == {
            "source": ["fixture.nodes"],
            "detail-type": ["Node Health Event"],
        }
        schedule = events.describe_rule(Name=stack.physical_id("RecorderFunctionSweep"))
        assert schedule["ScheduleExpression"] == "rate(5 minutes)"
        target = events.list_targets_by_rule(Rule=stack.physical_id("RecorderFunctionSweep"))["Targets"][0]
        assert (target["Arn"], target["Input"]) == (stack.arn("RecorderFunction"), '{"kind": "sweep"}')
        routing = events.list_targets_by_rule(Rule=stack.physical_id("RoutingRule"))["Targets"]
        assert {t["Id"] for t in routing} == {"queue", "flow", "topic", "echo"}
        policy = json.loads(
            deployed.client("lambda").get_policy(FunctionName=stack.physical_id("EchoFunction"))["Policy"]
        )
        assert [s["Sid"] for s in policy["Statement"]] == ["RoutingRuleEchoPermission"]
        assert "RecorderFunctionSweep" in stack.schedules

    def test_state_machine_definition_is_substituted(self, deployed: Sandbox) -> None:
        described = deployed.client("stepfunctions").describe_state_machine(
            stateMachineArn=deployed.stack.arn("FlowStateMachine")
        )
        definition = json.loads(described["definition"])
        assert definition["States"]["Echo"]["Parameters"]["FunctionName"] == deployed.stack.arn(
            "EchoFunction"
        )
        assert definition["States"]["Echo"]["Resource"] == "arn:aws:states:::lambda:invoke"
        assert definition["States"]["Record Result"]["Parameters"]["TableName"] == "fixture-records-test"
        assert described["roleArn"] == deployed.stack.arn("FlowStateMachineRole")

    def test_api_resources_methods_and_stage(self, deployed: Sandbox) -> None:
        api = deployed.stack.apis["FixtureApi"]
        apigw = deployed.client("apigateway")
        paths = {item["path"]: item for item in apigw.get_resources(restApiId=api.api_id)["items"]}
        assert {"/items", "/items/{id}", "/files/{proxy+}", "/health"} <= set(paths)
        method = apigw.get_method(
            restApiId=api.api_id, resourceId=paths["/items/{id}"]["id"], httpMethod="GET"
        )
        assert method["authorizationType"] == "AWS_IAM"
        health = apigw.get_method(restApiId=api.api_id, resourceId=paths["/health"]["id"], httpMethod="GET")
        assert health["authorizationType"] == "NONE"
        assert apigw.get_stage(restApiId=api.api_id, stageName="test")["stageName"] == "test"

    def test_roles_alarm_and_log_group(self, deployed: Sandbox) -> None:
        iam = deployed.client("iam")
        role = deployed.stack.physical_id("StateMachineEventsRole")
        assert iam.list_role_policies(RoleName=role)["PolicyNames"] == ["start-flow"]
        alarms = deployed.client("cloudwatch").describe_alarms(
            AlarmNames=[deployed.stack.physical_id("DeadLetterAlarm")]
        )
        alarm = alarms["MetricAlarms"][0]
        assert alarm["Dimensions"] == [
            {"Name": "QueueName", "Value": deployed.stack.attribute("WorkDeadLetterQueue", "QueueName")}
        ]
        assert alarm["AlarmActions"] == [deployed.stack.arn("NotificationsTopic")]
        groups = deployed.client("logs").describe_log_groups(logGroupNamePrefix="/aws/lambda/")["logGroups"]
        assert [(g["logGroupName"], g["retentionInDays"]) for g in groups] == [
            (f"/aws/lambda/{deployed.stack.physical_id('EchoFunction')}", 7)
        ]

    def test_policy_templates_become_the_roles_inline_policies(self, deployed: Sandbox) -> None:
        inline, managed = _role_documents(deployed, "ApiFunctionRole")
        table_arn = deployed.stack.arn("RecordsTable")
        # SAM's DynamoDBCrudPolicy template, expanded for the table (no Version: as SAM writes it)
        assert inline == [
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": [
                            "dynamodb:GetItem",
                            "dynamodb:DeleteItem",
                            "dynamodb:PutItem",
                            "dynamodb:Scan",
                            "dynamodb:Query",
                            "dynamodb:UpdateItem",
                            "dynamodb:BatchWriteItem",
                            "dynamodb:BatchGetItem",
                            "dynamodb:DescribeTable",
                            "dynamodb:ConditionCheckItem",
                        ],
                        "Resource": [table_arn, f"{table_arn}/index/*"],
                    }
                ]
            }
        ]
        assert [m["Arn"] for m in managed] == [
            "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
        ]
        flow, _ = _role_documents(deployed, "FlowStateMachineRole")
        [invoke] = flow[0]["Statement"]  # LambdaInvokePolicy, as SAM expands it
        assert invoke["Action"] == ["lambda:InvokeFunction"]
        assert invoke["Resource"] == f"{deployed.stack.arn('EchoFunction')}*"

    def test_outputs_and_conditions(self, deployed: Sandbox) -> None:
        stack = deployed.stack
        api_id = stack.apis["FixtureApi"].api_id
        assert stack.outputs == {
            "ApiUrl": f"https://{api_id}.execute-api.us-east-1.amazonaws.com/test/",
            "FlowArn": stack.arn("FlowStateMachine"),
            "TableAndTopic": "fixture-records-test fixture-notifications-test",
            "SecondZone": "y",
            "Literal": "${NotAVariable}-hello",
        }
        assert stack.conditions == {"IsProd": False, "NotProd": True, "TestOrDev": True, "TestAndHello": True}
        assert stack.skipped == {"ProdOnlyTopic": "IsProd"}
        with pytest.raises(KeyError, match="condition IsProd is false"):
            stack.physical_id("ProdOnlyTopic")


# --- parameters, conditions, intrinsics ------------------------------------------------------------
def test_parameter_overrides_flip_conditions(tmp_path: Path, aws_env: None) -> None:
    with mock_aws(config=MOCK_CONFIG):
        stack = deploy(TEMPLATE, parameters={"Stage": "prod", "Greeting": "hi"})
        assert stack.physical_id("ProdOnlyTopic").endswith(":prod-only")
        assert "DeadLetterAlarm" in stack.skipped
        assert stack.function("EchoFunction").environment["MODE"] == "production"
        assert stack.function("EchoFunction").environment["GREETING"] == "hi"
        assert stack.outputs["ProdTopic"] == stack.physical_id("ProdOnlyTopic")


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"Stage": "Not Valid"}, r"Parameters.Stage: 'Not Valid' does not match"),
        ({"Nope": "x"}, r"unknown parameter override\(s\) Nope"),
    ],
)
def test_bad_parameters_are_loud(aws_env: None, parameters: dict[str, str], message: str) -> None:
    with mock_aws(config=MOCK_CONFIG), pytest.raises(TemplateError, match=message):
        deploy(TEMPLATE, parameters=parameters)


def _resolver(**resources: Any) -> Resolver:
    def ref(name: str) -> Any:
        return resources[name]["Ref"]

    def get_att(name: str, attribute: str) -> Any:
        return resources[name][attribute]

    return Resolver(
        region="eu-west-1",
        account_id="111122223333",
        stack_name="s",
        parameters={"Env": "dev", "List": ["a", "b"]},
        condition_definitions={"IsDev": {"Fn::Equals": [{"Ref": "Env"}, "dev"]}},
        ref=ref,
        get_att=get_att,
    )


def test_resolver_intrinsics() -> None:
    resolver = _resolver(Queue={"Ref": "https://q", "Arn": "arn:q"})
    resolved = resolver.resolve(
        {
            "sub": {
                "Fn::Sub": "${AWS::Partition}:${AWS::Region}:${AWS::AccountId}:${Queue.Arn}:${Env}"
                ":${AWS::URLSuffix}"
            },
            "subMap": {"Fn::Sub": ["${X}-${AWS::StackName}", {"X": {"Ref": "Queue"}}]},
            "if": {"Fn::If": ["IsDev", "yes", "no"]},
            "gone": {"Fn::If": ["IsDev", {"Ref": "AWS::NoValue"}, "kept"]},
            "list": ["a", {"Ref": "AWS::NoValue"}, "b"],
            "join": {"Fn::Join": ["-", {"Ref": "List"}]},
            "select": {"Fn::Select": ["1", {"Fn::Split": [",", "x,y"]}]},
            "logic": {"Fn::And": [{"Condition": "IsDev"}, {"Fn::Or": [False, {"Fn::Not": [False]}]}]},
            "getatt": {"Fn::GetAtt": "Queue.Arn"},
        },
        where="test",
    )
    assert resolved == {
        "sub": "aws:eu-west-1:111122223333:arn:q:dev:amazonaws.com",
        "subMap": "https://q-s",
        "if": "yes",
        "list": ["a", "b"],
        "join": "a-b",
        "select": "y",
        "logic": True,
        "getatt": "arn:q",
    }
    assert resolver.resolve({"Ref": "AWS::NoValue"}, where="x") is NO_VALUE


# --- loud errors ------------------------------------------------------------------------------------
def test_unsupported_resource_type_names_the_logical_id(tmp_path: Path, aws_env: None) -> None:
    template = {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {}}}}
    with pytest.raises(TemplateError, match=r"^Bucket: resource type AWS::S3::Bucket is not supported"):
        _deploy_tmp(tmp_path, template)


def test_unsupported_intrinsic_names_the_logical_id(tmp_path: Path, aws_env: None) -> None:
    template = {
        "Resources": {
            "Topic": {
                "Type": "AWS::SNS::Topic",
                "Properties": {"TopicName": {"Fn::FindInMap": ["M", "a", "b"]}},
            }
        }
    }
    with pytest.raises(TemplateError, match=r"Topic.*Fn::FindInMap is not supported"):
        _deploy_tmp(tmp_path, template)


def test_unknown_property_and_event_type_are_loud(tmp_path: Path, aws_env: None) -> None:
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"Colour": "red"}}}}
    with pytest.raises(TemplateError, match=r"^Queue: AWS::SQS::Queue property Colour not supported"):
        _deploy_tmp(tmp_path, template)


@pytest.mark.parametrize(
    ("resource", "properties", "message"),
    [
        # SAM passes it on to AWS::Lambda::Function; a VPC changes what the function reaches: refused
        (
            "EchoFunction",
            {"VpcConfig": {"SubnetIds": ["subnet-1"], "SecurityGroupIds": ["sg-1"]}},
            r"^EchoFunction: AWS::Lambda::Function property VpcConfig not supported",
        ),
        # SAM itself rejects it; the translator's message names the function and the event
        (
            "EchoFunction",
            {
                "Events": {
                    "Upload": {"Type": "S3", "Properties": {"Bucket": "b", "Events": "s3:ObjectCreated:*"}}
                }
            },
            r"\[EchoFunction\].*\[Upload\]",
        ),
        # SAM generates a resource type the sandbox has no provider for: refused
        (
            "EchoFunction",
            {
                "Events": {
                    "Logs": {
                        "Type": "CloudWatchLogs",
                        "Properties": {"LogGroupName": "g", "FilterPattern": ""},
                    }
                }
            },
            r"^EchoFunctionLogs: resource type AWS::Logs::SubscriptionFilter is not supported",
        ),
        # SAM answers CORS preflight with MOCK integrations the local server does not run
        (
            "FixtureApi",
            {"Cors": "'*'"},
            r"^FixtureApi .*paths\./\S+\.options: only Lambda proxy integrations",
        ),
        # a role (not the caller's credentials) invoking the function
        (
            "FixtureApi",
            {
                "Auth": {
                    "DefaultAuthorizer": "AWS_IAM",
                    "InvokeRole": "arn:aws:iam::123456789012:role/invoker",
                }
            },
            r"^FixtureApi .*only Lambda proxy integrations",
        ),
        # a stage setting the sandbox does not apply
        (
            "FixtureApi",
            {"MethodSettings": [{"ResourcePath": "/*", "HttpMethod": "*", "CachingEnabled": True}]},
            r"MethodSettings\[0\]: CachingEnabled",
        ),
    ],
)
def test_what_sam_generates_and_the_sandbox_cannot_deploy_or_serve_is_loud(
    tmp_path: Path, aws_env: None, resource: str, properties: dict[str, Any], message: str
) -> None:
    def edit(template: dict[str, Any]) -> None:
        template["Resources"][resource]["Properties"].update(properties)

    path = _fixture_with(tmp_path, edit)
    try:
        with mock_aws(config=MOCK_CONFIG), pytest.raises(TemplateError, match=message):
            deploy(path)
    finally:
        path.unlink()


def test_event_invoke_config_sets_the_async_retries(tmp_path: Path, aws_env: None) -> None:
    def edit(template: dict[str, Any]) -> None:
        template["Resources"]["EchoFunction"]["Properties"]["EventInvokeConfig"] = {"MaximumRetryAttempts": 0}

    path = _fixture_with(tmp_path, edit)
    try:
        with mock_aws(config=MOCK_CONFIG):
            stack = deploy(path)
            assert stack.function("EchoFunction").max_async_retries == 0
            assert stack.function("RecorderFunction").max_async_retries == 2  # Lambda's default
            config = boto3.client("lambda").get_function_event_invoke_config(
                FunctionName=stack.physical_id("EchoFunction")
            )
            assert config["MaximumRetryAttempts"] == 0
    finally:
        path.unlink()


def test_missing_definition_substitution_is_loud(tmp_path: Path, aws_env: None) -> None:
    def drop_substitution(template: dict[str, Any]) -> None:
        del template["Resources"]["FlowStateMachine"]["Properties"]["DefinitionSubstitutions"][
            "RecordsTableName"
        ]

    path = _fixture_with(tmp_path, drop_substitution)
    try:
        with (
            mock_aws(config=MOCK_CONFIG),
            pytest.raises(TemplateError, match=r"^FlowStateMachine .*RecordsTableName"),
        ):
            deploy(path)
    finally:
        path.unlink()


def test_unknown_reference_is_loud(tmp_path: Path, aws_env: None) -> None:
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": {"Ref": "Nowhere"}}}}
    }
    with pytest.raises(TemplateError, match=r"Topic: Ref: unknown resource or parameter 'Nowhere'"):
        _deploy_tmp(tmp_path, template)


def test_dependency_order_follows_references(tmp_path: Path, aws_env: None) -> None:
    template = {
        "Resources": {
            "Policy": {
                "Type": "AWS::SQS::QueuePolicy",
                "Properties": {"Queues": [{"Ref": "Queue"}], "PolicyDocument": {"Statement": []}},
            },
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
        }
    }
    stack = _deploy_tmp(tmp_path, template)
    assert list(stack.resources) == ["Queue", "Policy"]


def test_dependency_cycle_is_loud(tmp_path: Path, aws_env: None) -> None:
    def queue(dead_letter: str) -> dict[str, Any]:
        redrive = {"deadLetterTargetArn": {"Fn::GetAtt": [dead_letter, "Arn"]}, "maxReceiveCount": 1}
        return {"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": redrive}}

    template = {"Resources": {"A": queue("B"), "B": queue("A")}}
    with pytest.raises(TemplateError, match=r"dependency cycle A -> B -> A"):
        _deploy_tmp(tmp_path, template)


def test_reserved_concurrency_is_deployed(tmp_path: Path, aws_env: None) -> None:
    def edit(template: dict[str, Any]) -> None:
        template["Resources"]["EchoFunction"]["Properties"]["ReservedConcurrentExecutions"] = 2

    path = _fixture_with(tmp_path, edit)
    try:
        with mock_aws(config=MOCK_CONFIG):
            stack = deploy(path)
            assert stack.function("EchoFunction").reserved_concurrency == 2
            assert stack.function("RecorderFunction").reserved_concurrency is None  # the account's pool
            concurrency = boto3.client("lambda").get_function_concurrency(
                FunctionName=stack.physical_id("EchoFunction")
            )
            assert concurrency["ReservedConcurrentExecutions"] == 2
    finally:
        path.unlink()


def test_environment_over_4_kb_fails_the_deploy_as_lambda_does(tmp_path: Path, aws_env: None) -> None:
    def edit(template: dict[str, Any]) -> None:
        variables = template["Resources"]["EchoFunction"]["Properties"]["Environment"]["Variables"]
        variables["PADDING"] = "x" * 4000  # with the Globals' variables, past 4 KB

    path = _fixture_with(tmp_path, edit)
    try:
        with mock_aws(config=MOCK_CONFIG), pytest.raises(TemplateError) as raised:
            deploy(path)
    finally:
        path.unlink()
    message = str(raised.value)
    assert message.startswith(
        "EchoFunction (AWS::Lambda::Function): An error occurred (InvalidParameterValueException)"
    )
    assert "exceeded the 4KB limit. String measured: {" in message


def test_environment_size_is_measured_as_lambda_quotes_it() -> None:
    at_limit = {"K": "x" * (4096 - len('{"K":""}'))}
    check_environment_size(at_limit)  # 4,096 bytes: accepted
    with pytest.raises(Exception, match="InvalidParameterValueException"):
        check_environment_size({"K": at_limit["K"] + "x"})
    with pytest.raises(Exception, match="InvalidParameterValueException"):  # bytes, not characters
        check_environment_size({"K": at_limit["K"][:-1] + "é"})


# --- seams into moto's IAM -----------------------------------------------------------------------------
def test_aws_managed_policies_are_added_to_moto_iam(aws_env: None) -> None:
    arn = "arn:aws:iam::aws:policy/AmazonSQSReadOnlyAccess"  # attached by no template of these tests
    with mock_aws():
        iam = boto3.client("iam")
        with pytest.raises(iam.exceptions.NoSuchEntityException):
            iam.get_policy(PolicyArn=arn)  # moto does not load them by default: the seam is needed
        add_aws_managed_policies("123456789012", "aws", [arn])
        policy = iam.get_policy(PolicyArn=arn)["Policy"]
        version = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])["PolicyVersion"]
        document: Any = version["Document"]
        assert "sqs:GetQueueAttributes" in document["Statement"][0]["Action"]
        with pytest.raises(TemplateError, match="not an AWS managed policy"):
            add_aws_managed_policies("123456789012", "aws", ["arn:aws:iam::aws:policy/NoSuchPolicy"])


def test_versionless_policies_are_accepted_as_iam_accepts_them(aws_env: None) -> None:
    versionless = {"Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}]}
    trust = {"Version": "2012-10-17", "Statement": []}
    with mock_aws():
        iam = boto3.client("iam")
        iam.create_role(RoleName="r", AssumeRolePolicyDocument=json.dumps(trust))
        put = {"RoleName": "r", "PolicyName": "p", "PolicyDocument": json.dumps(versionless)}
        with pytest.raises(iam.exceptions.MalformedPolicyDocumentException):
            iam.put_role_policy(**put)  # moto alone is stricter than IAM: the seam is needed
        with versionless_policies_accepted():
            iam.put_role_policy(**put)
        stored: Any = iam.get_role_policy(RoleName="r", PolicyName="p")["PolicyDocument"]
        assert stored == versionless
