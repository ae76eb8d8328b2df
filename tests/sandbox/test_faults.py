"""Faults on any AWS call (sandbox.emulator.aws_calls.faults): the error a client sees, shaped as AWS shapes
it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, ReadTimeoutError

from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS
from sandbox.emulator.patching import SeamDrift
from sandbox.emulator.stepfunctions import task_timeouts as stepfunctions_task_timeouts
from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
NO_RETRIES = Config(retries={"mode": "standard", "total_max_attempts": 1})


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=8) as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def no_faults(sb: Sandbox) -> Iterator[None]:
    yield
    sb.apply_fault("clear", {})


def client(sb: Sandbox, service: str, config: Config = NO_RETRIES) -> Any:
    return sb.session().client(service, config=config)  # type: ignore[call-overload]


def error_of(call: Any) -> tuple[str, int, str]:
    with pytest.raises(ClientError) as raised:
        call()
    response = raised.value.response
    return (
        response["Error"]["Code"],
        response["ResponseMetadata"]["HTTPStatusCode"],
        type(raised.value).__name__,
    )


# --- the error each service answers ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("service", "call", "expected"),
    [
        # modeled errors arrive as their own exception class, unmodeled ones as a plain ClientError
        (
            "dynamodb",
            lambda c: c.get_item(TableName="t", Key={"pk": {"S": "a"}}),
            ("ProvisionedThroughputExceededException", 400, "ProvisionedThroughputExceededException"),
        ),
        ("dynamodb", lambda c: c.list_tables(), ("ThrottlingException", 400, "ThrottlingException")),
        ("stepfunctions", lambda c: c.list_state_machines(), ("ThrottlingException", 400, "ClientError")),
        ("sagemaker", lambda c: c.list_clusters(), ("ThrottlingException", 400, "ClientError")),
        ("sns", lambda c: c.list_topics(), ("Throttled", 429, "ThrottledException")),
        (
            "lambda",
            lambda c: c.list_functions(),
            ("TooManyRequestsException", 429, "TooManyRequestsException"),
        ),
        ("events", lambda c: c.list_rules(), ("ThrottlingException", 400, "ThrottlingException")),
        ("cloudformation", lambda c: c.list_stacks(), ("Throttling", 400, "ClientError")),
        ("s3", lambda c: c.list_buckets(), ("SlowDown", 503, "ClientError")),
    ],
)
def test_throttling_as_each_service_answers_it(
    sb: Sandbox, service: str, call: Any, expected: tuple[str, int, str]
) -> None:
    sb.apply_fault("throttling", {"rate": 1, "services": [service], "external": True})
    assert error_of(lambda: call(client(sb, service))) == expected


@pytest.mark.parametrize(
    ("service", "call", "expected"),
    [
        ("dynamodb", lambda c: c.list_tables(), ("InternalServerError", 500, "InternalServerError")),
        ("stepfunctions", lambda c: c.list_state_machines(), ("InternalFailure", 500, "ClientError")),
        ("sagemaker", lambda c: c.list_clusters(), ("InternalFailure", 500, "ClientError")),
        ("sns", lambda c: c.list_topics(), ("InternalError", 500, "InternalErrorException")),
        (
            "budgets",
            lambda c: c.describe_budgets(AccountId="123456789012"),
            ("InternalErrorException", 500, "InternalErrorException"),
        ),
    ],
)
def test_server_errors_as_each_service_answers_them(
    sb: Sandbox, service: str, call: Any, expected: tuple[str, int, str]
) -> None:
    sb.apply_fault("server_error", {"rate": 1, "services": [service], "external": True})
    assert error_of(lambda: call(client(sb, service))) == expected


def test_a_failed_call_is_not_carried_out(sb: Sandbox) -> None:
    sb.apply_fault("server_error", {"rate": 1, "services": ["sns"], "external": True})
    sns = client(sb, "sns")
    assert error_of(lambda: sns.create_topic(Name="never-created"))[0] == "InternalError"
    sb.apply_fault("clear", {})
    assert not [t for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith(":never-created")]


def test_botocore_retries_a_throttled_call_as_on_aws(sb: Sandbox) -> None:
    sb.apply_fault("throttling", {"rate": 1, "services": ["sqs"], "times": 2, "external": True})
    retrying = client(sb, "sqs", Config(retries={"mode": "standard", "max_attempts": 3}))
    answered = retrying.list_queues()
    assert answered["ResponseMetadata"]["RetryAttempts"] == 2
    [fault] = sb.metrics()["aws_call_faults"]
    assert fault["hits"] == 2


def test_operation_filter_and_latency(sb: Sandbox) -> None:
    sb.apply_fault("latency", {"rate": 1, "ms": 1, "external": True})
    sb.apply_fault("server_error", {"rate": 1, "operations": ["ListTopics"], "external": True})
    sns = client(sb, "sns")
    sns.create_topic(Name="fault-filter")  # not ListTopics: through, only delayed
    assert error_of(sns.list_topics)[0] == "InternalError"
    latency = next(f for f in sb.metrics()["aws_call_faults"] if f["fault"] == "latency")
    assert latency["hits"] == 2


def test_a_seed_replays_the_same_faults(sb: Sandbox) -> None:
    def outcomes() -> list[bool]:
        sb.apply_fault("clear", {})
        sb.apply_fault("throttling", {"rate": 0.5, "seed": 7, "services": ["sqs"], "external": True})
        sqs = client(sb, "sqs")
        answers = []
        for _ in range(12):
            try:
                sqs.list_queues()
                answers.append(True)
            except ClientError:
                answers.append(False)
        return answers

    first = outcomes()
    assert first == outcomes()
    assert True in first
    assert False in first


def test_faults_leave_the_sandbox_own_clients_alone_by_default(sb: Sandbox) -> None:
    sb.apply_fault("throttling", {"rate": 1})
    assert client(sb, "sqs").list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_bad_fault_parameters_are_refused(sb: Sandbox) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        sb.apply_fault("throttling", {"rate": 2})
    with pytest.raises(ValueError, match="bad parameters"):
        sb.apply_fault("server_error", {"rate": 1, "ms": 5})
    with pytest.raises(ValueError, match="needs ms"):
        sb.apply_fault("latency", {"rate": 1})


# --- the control plane's calls ------------------------------------------------------------------------
def test_a_function_call_is_throttled_and_retried_by_its_sdk(sb: Sandbox) -> None:
    sb.apply_fault("throttling", {"rate": 1, "services": ["dynamodb"], "times": 1})
    result = sb.invoke("RecorderFunction", {"kind": "sweep"})
    assert result.ok, result.payload
    [fault] = sb.metrics()["aws_call_faults"]
    assert fault["hits"] == 1  # the function's put_item was throttled once, then retried


def allowing(sb: Sandbox, name: str, action: str) -> str:
    iam = sb.client("iam")
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    statement = {"Effect": "Allow", "Action": action, "Resource": "*"}
    iam.put_role_policy(
        RoleName=name,
        PolicyName="task",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
    )
    return str(role)


def run_task(
    sb: Sandbox, name: str, resource: str, action: str, parameters: dict[str, Any]
) -> dict[str, Any]:
    definition = {
        "StartAt": "Call",
        "States": {
            "Call": {
                "Type": "Task",
                "Resource": resource,
                "Parameters": parameters,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    sfn = sb.client("stepfunctions")
    machine = sfn.create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=allowing(sb, name, action)
    )["stateMachineArn"]
    finished = sb.wait_for_execution(sfn.start_execution(stateMachineArn=machine, input="{}")["executionArn"])
    assert finished["status"] == "SUCCEEDED", finished
    error: dict[str, Any] = json.loads(finished["output"])["error"]
    return error


def test_an_aws_sdk_task_sees_an_unmodeled_throttling_as_the_service_exception(sb: Sandbox) -> None:
    sb.apply_fault("throttling", {"rate": 1, "services": ["sagemaker"]})
    error = run_task(
        sb, "fault-sagemaker", "arn:aws:states:::aws-sdk:sagemaker:listClusters", "sagemaker:ListClusters", {}
    )
    assert error["Error"] == "SageMaker.SageMakerException"
    assert "Rate exceeded" in error["Cause"]
    assert "Status Code: 400" in error["Cause"]


@pytest.mark.parametrize(
    ("service", "resource", "action", "parameters", "expected"),
    [
        # a modeled throttling error arrives by its own name
        (
            "budgets",
            "arn:aws:states:::aws-sdk:budgets:describeBudgets",
            "budgets:ViewBudget",
            lambda sb: {"AccountId": sb.account_id},
            "Budgets.ThrottlingException",
        ),
        # an optimized integration sees the service's own throttling error
        (
            "dynamodb",
            "arn:aws:states:::dynamodb:putItem",
            "dynamodb:PutItem",
            lambda sb: {
                "TableName": sb.stack.physical_id("RecordsTable"),
                "Item": {"pk": {"S": "x"}, "sk": {"S": "y"}},
            },
            "DynamoDB.ProvisionedThroughputExceededException",
        ),
    ],
)
def test_a_task_sees_a_modeled_throttling_by_its_name(
    sb: Sandbox,
    service: str,
    resource: str,
    action: str,
    parameters: Callable[[Sandbox], dict[str, Any]],
    expected: str,
) -> None:
    sb.apply_fault("throttling", {"rate": 1, "services": [service]})
    error = run_task(sb, f"fault-{service}", resource, action, parameters(sb))
    assert error["Error"] == expected


# --- the admin route and HTTP clients of serve_aws -------------------------------------------------------
def test_the_admin_route_arms_and_clears_faults_for_http_clients(sb: Sandbox) -> None:
    url = sb.serve_aws(0)
    injected = requests.post(
        f"{url}/_sandbox/faults",
        json={"fault": "throttling", "params": {"rate": 1, "services": ["dynamodb"], "external": True}},
        timeout=10,
    )
    assert injected.status_code == 200, injected.text
    dynamodb = boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name=sb.region,
        aws_access_key_id=SANDBOX_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=SANDBOX_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        config=NO_RETRIES,
    )
    assert error_of(dynamodb.list_tables) == ("ThrottlingException", 400, "ThrottlingException")
    cleared = requests.post(f"{url}/_sandbox/faults", json={"fault": "clear"}, timeout=10)
    assert cleared.status_code == 200
    assert cleared.json()["result"]["cleared"] == 1
    assert "TableNames" in dynamodb.list_tables()


# --- lost_response: the call takes effect, the answer does not come back ----------------------------------
def test_a_lost_response_takes_effect_and_answers_the_service_internal_error(sb: Sandbox) -> None:
    sb.apply_fault("lost_response", {"rate": 1, "services": ["sns"], "external": True})
    sns = client(sb, "sns")
    assert error_of(lambda: sns.create_topic(Name="lost-answer")) == (
        "InternalError",
        500,
        "InternalErrorException",
    )
    sb.apply_fault("clear", {})
    assert [t for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith(":lost-answer")]


def test_a_lost_response_can_be_a_read_timeout_as_botocore_raises_it(sb: Sandbox) -> None:
    sb.apply_fault("lost_response", {"rate": 1, "services": ["sqs"], "answer": "timeout", "external": True})
    sqs = client(sb, "sqs")
    with pytest.raises(ReadTimeoutError, match="Read timeout on endpoint URL"):
        sqs.create_queue(QueueName="lost-timeout")
    [fault] = sb.metrics()["aws_call_faults"]
    assert (fault["answer"], fault["hits"]) == ("timeout", 1)
    sb.apply_fault("clear", {})
    assert any(url.endswith("/lost-timeout") for url in sqs.list_queues()["QueueUrls"])


def test_a_refused_call_never_takes_effect_even_with_a_lost_response_armed(sb: Sandbox) -> None:
    sb.apply_fault("lost_response", {"rate": 1, "services": ["sns"], "external": True})
    sb.apply_fault("throttling", {"rate": 1, "services": ["sns"], "external": True})
    sns = client(sb, "sns")
    assert error_of(lambda: sns.create_topic(Name="never-there"))[0] == "Throttled"
    sb.apply_fault("clear", {})
    assert not [t for t in sns.list_topics()["Topics"] if t["TopicArn"].endswith(":never-there")]


def test_a_bad_lost_response_answer_is_refused(sb: Sandbox) -> None:
    with pytest.raises(ValueError, match="answer must be"):
        sb.apply_fault("lost_response", {"rate": 1, "answer": "silence"})
    with pytest.raises(ValueError, match="bad parameters"):
        sb.apply_fault("throttling", {"rate": 1, "answer": "timeout"})


def test_a_function_whose_write_lost_its_answer_retries_a_write_that_took_effect(sb: Sandbox) -> None:
    sb.apply_fault(
        "lost_response", {"rate": 1, "services": ["dynamodb"], "operations": ["PutItem"], "times": 1}
    )
    result = sb.invoke("RecorderFunction", {"kind": "sweep"})
    assert result.ok, result.payload  # its SDK retried the write that had taken effect (an idempotent put)
    [fault] = sb.metrics()["aws_call_faults"]
    assert fault["hits"] == 1


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # SNS models InternalError (InternalErrorException); the topic exists all the same
        ("server_error", "Sns.InternalErrorException"),
        ("timeout", "States.TaskFailed"),
    ],
)
def test_an_aws_sdk_task_whose_call_took_effect_sees_the_lost_answer(
    sb: Sandbox, answer: str, expected: str
) -> None:
    sb.apply_fault("lost_response", {"rate": 1, "services": ["sns"], "answer": answer})
    name = f"lost-{answer.replace('_', '-')}"
    error = run_task(
        sb, f"fault-{name}", "arn:aws:states:::aws-sdk:sns:createTopic", "sns:CreateTopic", {"Name": name}
    )
    assert error["Error"] == expected
    sb.apply_fault("clear", {})
    topics = sb.client("sns").list_topics()["Topics"]
    assert [t for t in topics if t["TopicArn"].endswith(f":{name}")]


def test_the_admin_route_arms_a_lost_response_for_http_clients(sb: Sandbox) -> None:
    url = sb.serve_aws(0)
    params = {"rate": 1, "services": ["sqs"], "answer": "timeout", "external": True}
    injected = requests.post(
        f"{url}/_sandbox/faults", json={"fault": "lost_response", "params": params}, timeout=10
    )
    assert injected.status_code == 200, injected.text
    # a raw signed request: a boto3 client in this process would be answered before it left it
    request = AWSRequest(
        "POST",
        url,
        data=json.dumps({"QueueName": "lost-over-http"}),
        headers={"X-Amz-Target": "AmazonSQS.CreateQueue", "Content-Type": "application/x-amz-json-1.0"},
    )
    credentials = Credentials(
        SANDBOX_CREDENTIALS["AWS_ACCESS_KEY_ID"], SANDBOX_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    )
    SigV4Auth(credentials, "sqs", sb.region).add_auth(request)
    answered = requests.post(url, data=request.body, headers=dict(request.headers), timeout=10)
    # over HTTP a lost answer is the 5xx (the server cannot make the client's read time out)
    assert answered.status_code == 500
    assert answered.json()["__type"] == "InternalError"
    sb.apply_fault("clear", {})
    assert any(u.endswith("/lost-over-http") for u in client(sb, "sqs").list_queues()["QueueUrls"])


def test_the_read_timeout_seam_refuses_a_moved_executor(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task import (  # noqa: PLC0415
        StateTask,
    )

    monkeypatch.setattr(StateTask, "_from_error", lambda self, env: None)

    with pytest.raises(SeamDrift, match="fail_tasks_on_read_timeouts"):
        stepfunctions_task_timeouts.install()
