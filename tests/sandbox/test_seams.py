"""Each moto seam of sandbox/emulator/seams/: installed and removed cleanly, drift detected, behaviour kept.

These fail when a moto upgrade moves the code a seam replaces (moto is pinned; see sandbox/emulator/seams/).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.awslambda.models import LambdaBackend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.events.models import Rule
from moto.events.utils import EventTemplateParser
from moto.sns.models import Subscription
from moto.sqs.models import sqs_backends
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse

from sandbox.emulator import seams
from sandbox.emulator.lambda_runtime import LambdaRuntime
from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
PATCHED = [
    (LambdaSimpleBackend, "invoke"),
    (Rule, "send_to_targets"),
    (Subscription, "publish"),
    (LambdaBackend, "create_event_source_mapping"),
    (StepFunctionsParserBackend, "start_execution"),
    (StepFunctionResponse, "send_task_failure"),
]


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=4) as sandbox:
        yield sandbox


def _originals() -> list[Any]:
    return [owner.__dict__[name] for owner, name in PATCHED]


def test_install_and_uninstall_restore_moto() -> None:
    before = _originals()
    runtime = LambdaRuntime()
    try:
        seams.install(runtime)
        assert all(now is not was for now, was in zip(_originals(), before, strict=True))
        assert seams.active_runtime() is runtime
        with pytest.raises(RuntimeError, match="another sandbox"):
            seams.install(LambdaRuntime())
    finally:
        seams.uninstall()
        runtime.stop()
    assert _originals() == before
    assert seams.active_runtime() is None


@pytest.mark.parametrize(("owner", "name"), PATCHED)
def test_drift_is_detected_and_nothing_stays_installed(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str
) -> None:
    def moved(self: Any, renamed_argument: Any) -> None:
        raise AssertionError("never called")

    monkeypatch.setattr(owner, name, moved)
    before = _originals()
    runtime = LambdaRuntime()
    try:
        with pytest.raises(seams.SeamDrift, match=rf"{owner.__name__}\.{name} has parameters"):
            seams.install(runtime)
    finally:
        runtime.stop()
    assert _originals() == before
    assert seams.active_runtime() is None


# --- name_aws_sdk_errors: guards (before any test that starts the module's sandbox) ---------------------
def _error_name(service: str) -> str:
    return str(StateTaskServiceAwsSdk._normalise_service_error_name(service))


def test_aws_sdk_error_names_follow_the_java_sdk_rule_and_are_removed_outside_a_sandbox() -> None:
    with seams.installed(seams.name_aws_sdk_errors):
        # the ARN's service as moto calls it (sfn through its botocore name, stepfunctions)
        assert [_error_name(s) for s in ("sagemaker", "resourcegroupstaggingapi", "sfn", "dynamodb")] == [
            "SageMaker",
            "ResourceGroupsTaggingApi",
            "Sfn",
            "DynamoDb",
        ]
        assert _error_name("nosuchservice") == "nosuchservice"  # not botocore's: moto's own answer
    assert _error_name("sagemaker") == "sagemaker"
    assert _error_name("resourcegroupstaggingapi") == "resourcegroupstaggingapi"


def test_aws_sdk_error_names_refuse_to_install_beside_a_running_sandbox() -> None:
    runtime = LambdaRuntime()
    try:
        seams.install(runtime)
        with (
            pytest.raises(RuntimeError, match="sandbox is running"),
            seams.installed(seams.name_aws_sdk_errors),
        ):
            raise AssertionError("never entered")
    finally:
        seams.uninstall()
        runtime.stop()


def test_aws_sdk_error_names_detect_a_missing_service_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(StateTaskService, "_SERVICE_NAME_SFN_TO_BOTO_OVERRIDES")
    with pytest.raises(seams.SeamDrift, match="_SERVICE_NAME_SFN_TO_BOTO_OVERRIDES is gone"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


def test_aws_sdk_error_names_detect_errors_named_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StateTaskServiceAwsSdk, "_from_error", lambda self, env, ex: None)
    with pytest.raises(seams.SeamDrift, match="no longer calls"), seams.installed(seams.name_aws_sdk_errors):
        raise AssertionError("never entered")
    assert _error_name("sagemaker") == "sagemaker"


def test_aws_sdk_error_names_detect_a_changed_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        StateTaskServiceAwsSdk, "_normalise_service_error_name", staticmethod(lambda name, ex: name)
    )
    with pytest.raises(seams.SeamDrift, match="_normalise_service_error_name has parameters"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


# --- keep_event_account: guards (outside a sandbox, moto delivering to SQS) --------------------------------
def _event_through_moto_to_sqs() -> dict[str, Any]:
    events = boto3.client("events", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="account-seam")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events.put_rule(Name="account-seam", EventPattern=json.dumps({"source": ["seam.account"]}))
    events.put_targets(Rule="account-seam", Targets=[{"Id": "queue", "Arn": queue_arn}])
    events.put_events(Entries=[{"Source": "seam.account", "DetailType": "x", "Detail": '{"k": 1}'}])
    [message] = sqs.receive_message(QueueUrl=queue)["Messages"]
    body: dict[str, Any] = json.loads(message["Body"])
    return body


def test_event_account_is_kept_by_the_seam_and_dropped_without_it(iam_keys_env: None) -> None:
    with mock_aws():
        account = boto3.client("sts", region_name="us-east-1").get_caller_identity()["Account"]
        assert "account" not in _event_through_moto_to_sqs()  # moto 5.2.5's default template
    with mock_aws(), seams.installed(seams.keep_event_account):
        event = _event_through_moto_to_sqs()
    assert event["account"] == account
    assert event["detail"] == {"k": 1}
    assert "account" not in EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE  # uninstalled


def test_event_account_detects_a_changed_template(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EventTemplateParser, "DEFAULT_EVENT_INPUT_TEMPLATE", '{"account": "<account>"}')
    with pytest.raises(seams.SeamDrift, match="DEFAULT_EVENT_INPUT_TEMPLATE changed"):
        seams.install(LambdaRuntime())
    assert seams.active_runtime() is None


# --- keep_task_failure_cause: guards (outside a sandbox, before the module's sandbox starts) ----------------
def _failed_through_its_token() -> dict[str, Any]:
    """An execution waiting on a task token, failed with SendTaskFailure(error, cause)."""
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="tokens")["QueueUrl"]
    waiting = {
        "StartAt": "Wait",
        "States": {
            "Wait": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                "End": True,
            }
        },
    }
    machine = sfn.create_state_machine(
        name="waiting", definition=json.dumps(waiting), roleArn="arn:aws:iam::123456789012:role/states"
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, name=str(uuid.uuid4()))["executionArn"]
    for _ in range(500):
        messages = sqs.receive_message(QueueUrl=queue).get("Messages", [])
        if messages:
            break
        time.sleep(0.01)
    sfn.send_task_failure(taskToken=json.loads(messages[0]["Body"])["token"], error="E", cause="why")
    for _ in range(500):
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return dict(described)
        time.sleep(0.01)
    raise AssertionError("still running")


def test_send_task_failure_keeps_its_cause_with_the_seam_and_loses_it_without() -> None:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        with seams.installed(seams.keep_task_failure_cause):
            kept = _failed_through_its_token()
        lost = _failed_through_its_token()
    assert (kept["status"], kept["error"], kept["cause"]) == ("FAILED", "E", "why")
    # moto's own: the day this fails, moto keeps the cause and the seam can go
    assert (lost["status"], lost["error"], lost.get("cause")) == ("FAILED", "E", None)


# --- route_lambda_invoke ------------------------------------------------------------------------------
def test_invoke_of_a_function_outside_the_template_keeps_moto_behaviour(sb: Sandbox) -> None:
    client = sb.client("lambda")
    role = sb.stack.arn("EchoFunctionRole")
    client.create_function(
        FunctionName="outside",
        Runtime="python3.12",
        Role=role,
        Handler="x.y",
        Code={"ZipFile": b"PK\x05\x06" + b"\0" * 18},
    )
    assert client.invoke(FunctionName="outside", Payload=b'{"a": 1}')["Payload"].read() == b'{"a": 1}'
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        client.invoke(FunctionName="does-not-exist", Payload=b"{}")


# --- deliver_eventbridge_targets ---------------------------------------------------------------------
def test_disabled_and_schedule_rules_do_not_deliver_events(sb: Sandbox) -> None:
    events = sb.client("events")
    before = sb.metrics()["invocations"].get("RecorderFunction", {}).get("invocations", 0)
    rule = sb.stack.physical_id("RecorderFunctionNodeEvents")
    events.disable_rule(Name=rule)
    try:
        entry = {"Source": "fixture.nodes", "DetailType": "Node Health Event", "Detail": "{}"}
        events.put_events(Entries=[entry])
        # any event at all: the schedule rule (no pattern in moto = matches everything) must stay quiet
        events.put_events(Entries=[{"Source": "anything", "DetailType": "x", "Detail": "{}"}])
        assert sb.settle()
        assert sb.metrics()["invocations"].get("RecorderFunction", {}).get("invocations", 0) == before
    finally:
        events.enable_rule(Name=rule)
    events.put_events(
        Entries=[{"Source": "fixture.nodes", "DetailType": "Node Health Event", "Detail": "{}"}]
    )
    assert sb.settle()
    assert sb.metrics()["invocations"]["RecorderFunction"]["invocations"] == before + 1


def test_other_targets_are_still_delivered_by_moto(sb: Sandbox) -> None:
    logs = sb.client("logs")
    events = sb.client("events")
    logs.create_log_group(logGroupName="/aws/events/seam")
    events.put_rule(Name="to-logs", EventPattern=json.dumps({"source": ["seam.logs"]}))
    arn = f"arn:aws:logs:us-east-1:{sb.account_id}:log-group:/aws/events/seam"
    events.put_targets(Rule="to-logs", Targets=[{"Id": "logs", "Arn": arn}])
    events.put_events(Entries=[{"Source": "seam.logs", "DetailType": "x", "Detail": '{"k": 1}'}])
    [stream] = logs.describe_log_streams(logGroupName="/aws/events/seam")["logStreams"]
    [logged] = logs.get_log_events(logGroupName="/aws/events/seam", logStreamName=stream["logStreamName"])[
        "events"
    ]
    event = json.loads(logged["message"])
    assert event["detail"] == {"k": 1}
    assert event["account"] == sb.account_id  # keep_event_account


def test_failed_target_delivery_goes_to_the_target_dlq(sb: Sandbox) -> None:
    sqs = sb.client("sqs")
    events = sb.client("events")
    dlq = sqs.create_queue(QueueName="seam-target-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    missing = f"arn:aws:states:us-east-1:{sb.account_id}:stateMachine:gone"
    events.put_rule(Name="to-gone", EventPattern=json.dumps({"source": ["seam.gone"]}))
    events.put_targets(
        Rule="to-gone", Targets=[{"Id": "gone", "Arn": missing, "DeadLetterConfig": {"Arn": dlq_arn}}]
    )
    events.put_events(Entries=[{"Source": "seam.gone", "DetailType": "x", "Detail": '{"k": 1}'}])
    assert sb.settle()
    messages = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    assert json.loads(messages[0]["Body"])["detail"] == {"k": 1}
    assert messages[0]["MessageAttributes"]["TARGET_ARN"]["StringValue"] == missing


# --- deliver_sns_to_lambda ------------------------------------------------------------------------------
def test_sns_filter_policy_is_honoured(sb: Sandbox) -> None:
    sns = sb.client("sns")
    topic = sns.create_topic(Name="seam-filtered")["TopicArn"]
    sns.subscribe(
        TopicArn=topic,
        Protocol="lambda",
        Endpoint=sb.stack.arn("RecorderFunction"),
        Attributes={"FilterPolicy": json.dumps({"severity": ["high"]})},
    )
    before = sb.metrics()["invocations"].get("RecorderFunction", {}).get("invocations", 0)
    sns.publish(
        TopicArn=topic,
        Message="low",
        MessageAttributes={"severity": {"DataType": "String", "StringValue": "low"}},
    )
    sns.publish(
        TopicArn=topic,
        Message="high",
        MessageAttributes={"severity": {"DataType": "String", "StringValue": "high"}},
    )
    assert sb.settle()
    assert sb.metrics()["invocations"]["RecorderFunction"]["invocations"] == before + 1
    assert sb.metrics()["deliveries"]["sns->lambda"] >= 1


# --- detach_sqs_event_source_mappings --------------------------------------------------------------------
def test_sqs_mappings_are_listed_but_not_delivered_inline(sb: Sandbox) -> None:
    queue_arn = sb.stack.arn("WorkQueue")
    queue = next(
        q for q in sqs_backends[sb.account_id]["us-east-1"].queues.values() if q.queue_arn == queue_arn
    )
    assert queue.lambda_event_source_mappings == {}
    mappings = sb.client("lambda").list_event_source_mappings(EventSourceArn=queue_arn)["EventSourceMappings"]
    assert [m["UUID"] for m in mappings] == [sb.stack.physical_id("WorkerFunctionWork")]
    before = sb.metrics()["invocations"].get("WorkerFunction", {}).get("invocations", 0)
    sb.client("sqs").send_message(QueueUrl=sb.stack.physical_id("WorkQueue"), MessageBody="not inline")
    assert sb.metrics()["invocations"].get("WorkerFunction", {}).get("invocations", 0) == before
    assert sb.poller.poll_once() == 1
    assert sb.metrics()["invocations"]["WorkerFunction"]["invocations"] == before + 1


# --- name_unnamed_executions -------------------------------------------------------------------------------
def test_unnamed_executions_get_uuid_names(sb: Sandbox) -> None:
    sfn = sb.client("stepfunctions")
    flow = sb.stack.arn("FlowStateMachine")
    first = sfn.start_execution(stateMachineArn=flow, input="{}")["executionArn"]
    second = sfn.start_execution(stateMachineArn=flow, input="{}")["executionArn"]
    assert first != second
    assert re.fullmatch(r"[0-9a-f-]{36}", first.rsplit(":", 1)[1])
    assert sb.wait_for_execution(first)["status"] == "SUCCEEDED"


# --- name_aws_sdk_errors -----------------------------------------------------------------------------------
def test_a_failed_aws_sdk_task_is_caught_by_its_aws_error_name(sb: Sandbox) -> None:
    sfn = sb.client("stepfunctions")
    definition = {
        "StartAt": "Describe Missing",
        "States": {
            "Describe Missing": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sagemaker:describeModelBiasJobDefinition",
                "Parameters": {"JobDefinitionName": "missing"},
                "Catch": [
                    {
                        "ErrorEquals": ["SageMaker.ResourceNotFoundException"],
                        "ResultPath": "$.error",
                        "Next": "Caught",
                    }
                ],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    iam = sb.client("iam")  # the execution's calls are made with its role (IAM is enforced)
    role = iam.create_role(RoleName="seam", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    allow = {"Effect": "Allow", "Action": "sagemaker:DescribeModelBiasJobDefinition", "Resource": "*"}
    iam.put_role_policy(
        RoleName="seam",
        PolicyName="describe",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [allow]}),
    )
    machine = sfn.create_state_machine(
        name="seam-aws-sdk-errors", definition=json.dumps(definition), roleArn=role
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"]

    finished = sb.wait_for_execution(execution)

    assert finished["status"] == "SUCCEEDED", finished
    assert json.loads(finished["output"])["error"]["Error"] == "SageMaker.ResourceNotFoundException"


# --- record_aws_calls -----------------------------------------------------------------------------------
def test_aws_calls_are_counted_per_service_operation(sb: Sandbox) -> None:
    before = seams.aws_calls().get("sqs:ListQueues", 0)
    sb.client("sqs").list_queues()
    sb.client("sqs").list_queues()
    assert seams.aws_calls()["sqs:ListQueues"] == before + 2
    assert sb.metrics()["aws_calls"]["sqs:ListQueues"] == before + 2
