"""The in-process Lambda runtime: env, layer, context, isolation, errors, and every trigger."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sandbox.emulator import lambda_modules
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.deploy import FunctionSpec
from sandbox.emulator.lambda_runtime import InvocationResult, LambdaRuntime
from sandbox.emulator.schedules import Scheduler, parse_schedule
from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    """The fixture stack with background delivery on, at 600x (60 s of visibility timeout = 0.1 s)."""
    with Sandbox(TEMPLATE, simulators=False, speed=600, seed=2) as sandbox:
        yield sandbox


def _records(sb: Sandbox, pk: str) -> list[dict[str, Any]]:
    items = sb.client("dynamodb").query(
        TableName=sb.stack.physical_id("RecordsTable"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
    )["Items"]
    return [{key: value["S"] for key, value in item.items()} for item in items]


def _eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


# --- env, layer, context --------------------------------------------------------------------------
def test_environment_layer_and_context(sb: Sandbox) -> None:
    result = sb.invoke("EchoFunction", {"hello": "world"})
    assert result.ok
    body = result.json()
    spec = sb.stack.function("EchoFunction")
    assert body["event"] == {"hello": "world"}
    assert body["env"] == {
        "STAGE": "test",
        "MODE": "sandbox",
        "GREETING": "hello",
        "FIRST_ZONE": "a",
        "RECORDS_TABLE": "fixture-records-test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "AWS_SAM_LOCAL": None,  # Lambda does not set it (only `sam local` does)
        "AWS_ACCESS_KEY_ID": "testing",
    }
    context = body["context"]
    assert context["function_name"] == spec.name
    assert context["function_version"] == "$LATEST"
    assert context["invoked_function_arn"] == spec.arn
    assert context["memory_limit_in_mb"] == "256"
    assert context["aws_request_id"] == result.request_id
    assert 4000 < context["remaining_ms"] <= 5000  # Timeout: 5
    assert body["layer"] == "from-layer"
    assert body["helper"] == "echo-helper"


def test_each_function_has_its_own_modules_and_layer_copy(sb: Sandbox) -> None:
    echo = sb.invoke("EchoFunction", {}).json()
    assert echo["layer_loaded_for"] == sb.stack.function("EchoFunction").name
    # the layer module was imported again for the worker (its own execution environment)
    sb.client("sqs").send_message(QueueUrl=sb.stack.physical_id("WorkQueue"), MessageBody="isolation")
    record = _eventually(lambda: [r for r in _records(sb, "sqs") if r["body"] == "isolation"])
    assert record[0]["helper"] == "worker-helper"
    # the host (this thread) sees no function's modules: sys.modules holds views of those names only
    for name in ("app", "helper", "fixturelib"):
        module = sys.modules.get(name)
        assert module is None or lambda_modules.is_view(module)
        with pytest.raises((ModuleNotFoundError, AttributeError), match=f"No module named '{name}'"):
            importlib.import_module(name).__file__  # noqa: B018 - the host has no such module


def test_host_aws_configuration_is_hidden_and_restored(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "host-profile")
    monkeypatch.setenv("HOST_ONLY", "1")
    body = sb.invoke("EchoFunction", {"env_keys": ["AWS_PROFILE", "HOST_ONLY"]}).json()
    assert body["env"]["AWS_PROFILE"] is None  # the host's AWS configuration is not the function's
    assert body["env"]["AWS_ACCESS_KEY_ID"] == "testing"
    assert body["env"]["HOST_ONLY"] == "1"  # unrelated host variables pass through untouched
    assert os.environ["AWS_PROFILE"] == "host-profile"
    assert "RECORDS_TABLE" not in os.environ
    assert "AWS_LAMBDA_FUNCTION_NAME" not in os.environ


_GATED_HANDLER = """
import os, pathlib, time

def handler(event, context):
    gate = pathlib.Path(event["gate"])
    seen = {key: os.environ.get(key) for key in ("AWS_PROFILE", "HOST_ONLY", "AWS_LAMBDA_FUNCTION_NAME")}
    os.environ["SET_BY_FUNCTION"] = "1"
    (gate / "running").touch()
    deadline = time.monotonic() + 30
    while not (gate / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never released the gate")
        time.sleep(0.01)
    return seen
"""


def _gated_function(tmp_path: Path) -> FunctionSpec:
    """A function that stays running until the test creates ``<gate>/release``."""
    code = tmp_path / "gated"
    code.mkdir()
    (code / "gated_app.py").write_text(_GATED_HANDLER)
    return FunctionSpec(
        logical_id="GatedFunction",
        name="gated-function",
        arn="arn:aws:lambda:us-east-1:123456789012:function:gated-function",
        handler="gated_app.handler",
        runtime="python3.12",
        code_dir=code,
        layer_dirs=[],
        environment={"STAGE": "gated"},
        timeout=60,
        memory_size=128,
    )


def test_host_environment_changes_during_an_invocation_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The flaky ProfileNotFound: host-profile: a test set AWS_PROFILE, a background invocation
    # started, the test's teardown removed AWS_PROFILE, and the invocation's end wrote its snapshot
    # of the host environment back, resurrecting AWS_PROFILE for every later boto3 client. Here the
    # host changes its environment while a function is held running, deterministically.
    monkeypatch.setenv("AWS_PROFILE", "host-profile")
    monkeypatch.setenv("HOST_ONLY", "1")
    runtime = LambdaRuntime(region="us-east-1")
    runtime.register(_gated_function(tmp_path))
    results: list[InvocationResult] = []
    worker = threading.Thread(
        target=lambda: results.append(runtime.invoke("GatedFunction", {"gate": str(tmp_path)}))
    )
    worker.start()
    try:
        assert _eventually(lambda: (tmp_path / "running").exists() or not worker.is_alive())
        # while the function runs, other threads see the host's environment, not the function's
        assert os.environ.get("AWS_PROFILE") == "host-profile"
        assert "AWS_LAMBDA_FUNCTION_NAME" not in os.environ
        assert "STAGE" not in os.environ
        monkeypatch.delenv("AWS_PROFILE")  # what the test's teardown did
        monkeypatch.setenv("HOST_DURING", "2")
        monkeypatch.delenv("HOST_ONLY")
    finally:
        (tmp_path / "release").touch()
        worker.join(30)
        runtime.stop()
    assert not worker.is_alive()
    assert results[0].ok, results[0].json()
    assert results[0].json() == {
        "AWS_PROFILE": None,  # the host's AWS configuration is not the function's
        "HOST_ONLY": "1",  # unrelated host variables pass through
        "AWS_LAMBDA_FUNCTION_NAME": "gated-function",
    }
    assert "AWS_PROFILE" not in os.environ  # removed by the host during the invocation: stays removed
    assert "HOST_ONLY" not in os.environ
    assert os.environ["HOST_DURING"] == "2"
    assert "SET_BY_FUNCTION" not in os.environ  # the function's own changes stay in its environment
    assert "AWS_LAMBDA_FUNCTION_NAME" not in os.environ
    # the per-thread os.environ still offers what os._Environ does beyond a mapping
    assert os.environ.copy()["HOST_DURING"] == "2"
    assert (os.environ | {"EXTRA": "3"})["EXTRA"] == "3"
    assert "EXTRA" not in os.environ


def test_handler_exception_is_a_lambda_error_result(sb: Sandbox) -> None:
    result = sb.invoke("EchoFunction", {"fail": True})
    assert result.function_error == "Unhandled"
    error = result.json()
    assert error["errorType"] == "FixtureError"
    assert error["errorMessage"] == "asked to fail"
    assert error["requestId"] == result.request_id
    assert 'raise FixtureError("asked to fail")' in error["stackTrace"][-1]
    # as Lambda's, the trace is the handler's: none of the runtime's own frames (any of its modules)
    assert not any("sandbox/emulator/lambda_runtime/" in frame for frame in error["stackTrace"])


def test_boto3_invoke_request_response_and_event(sb: Sandbox) -> None:
    client = sb.client("lambda")
    name = sb.stack.physical_id("EchoFunction")
    response = client.invoke(FunctionName=name, Payload=json.dumps({"fail": True}))
    assert response["FunctionError"] == "Unhandled"
    assert json.loads(response["Payload"].read())["errorType"] == "FixtureError"
    ok = client.invoke(FunctionName=name, Payload=b'{"n": 1}')
    assert "FunctionError" not in ok
    assert json.loads(ok["Payload"].read())["event"] == {"n": 1}
    before = sb.metrics()["invocations"]["EchoFunction"]["invocations"]
    queued = client.invoke(FunctionName=name, InvocationType="Event", Payload=b"{}")
    assert queued["StatusCode"] == 202
    assert sb.settle()
    assert sb.metrics()["invocations"]["EchoFunction"]["invocations"] == before + 1


def test_concurrent_invocations_are_isolated(sb: Sandbox) -> None:
    results: list[Any] = []

    def call(n: int) -> None:
        results.append(sb.invoke("EchoFunction", {"n": n}).json()["env"]["AWS_LAMBDA_FUNCTION_NAME"])

    threads = [threading.Thread(target=call, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [sb.stack.function("EchoFunction").name] * 8


# --- triggers ---------------------------------------------------------------------------------------
def test_step_functions_invokes_lambda_and_catches_custom_errors(sb: Sandbox) -> None:
    sfn = sb.client("stepfunctions")
    flow = sb.stack.arn("FlowStateMachine")
    ok = sfn.start_execution(stateMachineArn=flow, name="flow-ok", input=json.dumps({"x": 1}))
    assert sb.wait_for_execution(ok["executionArn"])["status"] == "SUCCEEDED"
    assert [r for r in _records(sb, "flow") if r["sk"] == "flow-ok"] == [
        {"pk": "flow", "sk": "flow-ok", "mode": "sandbox"}
    ]
    failed = sfn.start_execution(stateMachineArn=flow, input=json.dumps({"fail": True}))
    described = sb.wait_for_execution(failed["executionArn"])
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"failed": True, "errorName": "FixtureError"}


def test_step_functions_sees_a_throttled_function_as_lambdas_429(
    sb: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sb.runtime.spec("EchoFunction"), "reserved_concurrency", 0)
    started = sb.client("stepfunctions").start_execution(stateMachineArn=sb.stack.arn("FlowStateMachine"))
    described = sb.wait_for_execution(started["executionArn"])
    assert (described["status"], described.get("error")) == ("FAILED", "Lambda.TooManyRequestsException")


def test_sqs_batches_and_partial_batch_failures_with_redrive(sb: Sandbox) -> None:
    sqs = sb.client("sqs")
    queue = sb.stack.physical_id("WorkQueue")
    dlq = sb.stack.physical_id("WorkDeadLetterQueue")
    sb.poller.stop()  # send all first, then let one poller pass see them together
    try:
        bodies = [f"batch-{n}" for n in range(5)] + ["batch-fail"]
        for body in bodies:
            sqs.send_message(QueueUrl=queue, MessageBody=body)
        assert sb.poller.poll_once() == 2  # two batches of BatchSize 3, run at once by two pollers
    finally:
        sb.poller.__init__(sb.runtime, visibility_seconds=sb._wall_seconds)  # type: ignore[misc]
        sb.poller.start()
    processed = _eventually(
        lambda: len([r for r in _records(sb, "sqs") if r["body"].startswith("batch-")]) >= 5
    )
    assert processed
    records = [r for r in _records(sb, "sqs") if r["body"].startswith("batch-")]
    assert sorted(r["body"] for r in records) == [f"batch-{n}" for n in range(5)]
    assert {r["batch_size"] for r in records} <= {"1", "2", "3"}
    assert max(int(r["batch_size"]) for r in records) == 3
    # the failing message is retried (visibility timeout, scaled) and after maxReceiveCount=2 goes to the DLQ
    dead = _eventually(lambda: sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages"))
    assert [m["Body"] for m in dead] == ["batch-fail"]


def test_a_throttled_sqs_batch_goes_back_to_its_queue_and_counts_as_a_receive(sb: Sandbox) -> None:
    spec = sb.runtime.spec("WorkerFunction")
    throttles = sb.metrics()["invocations"]["WorkerFunction"]["throttles"]
    sqs = sb.client("sqs")
    spec.reserved_concurrency = 0  # the function may not run at all
    try:
        sqs.send_message(QueueUrl=sb.stack.physical_id("WorkQueue"), MessageBody="throttled")
        # each throttled receive returns the message to the queue; after maxReceiveCount (2), the DLQ,
        # as on Lambda (which is why AWS asks for a maxReceiveCount of 5 or more)
        dlq = sb.stack.physical_id("WorkDeadLetterQueue")

        def dead() -> list[str]:
            messages = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
            return [m["Body"] for m in messages if m["Body"] == "throttled"]

        assert _eventually(dead) == ["throttled"]
    finally:
        spec.reserved_concurrency = None
    assert sb.metrics()["invocations"]["WorkerFunction"]["throttles"] >= throttles + 2
    assert not [r for r in _records(sb, "sqs") if r["body"] == "throttled"]  # never ran


def test_sns_publish_reaches_lambda_with_real_event_shape(sb: Sandbox) -> None:
    topic = sb.stack.arn("NotificationsTopic")
    message_id = sb.client("sns").publish(TopicArn=topic, Message="budget crossed", Subject="alert")[
        "MessageId"
    ]
    records = _eventually(lambda: [r for r in _records(sb, "sns") if r["sk"] == message_id])
    assert records[0]["topic"] == topic
    assert records[0]["message"] == "budget crossed"
    assert records[0]["subscription"] == sb.stack.physical_id("RecorderFunctionNotifications")


def test_eventbridge_rule_invokes_lambda_with_iso_time(sb: Sandbox) -> None:
    events = sb.client("events")
    entry = {
        "Source": "fixture.nodes",
        "DetailType": "Node Health Event",
        "Detail": json.dumps({"node": "i-1"}),
    }
    event_id = events.put_events(Entries=[entry])["Entries"][0]["EventId"]
    records = _eventually(lambda: [r for r in _records(sb, "eventbridge") if r["sk"] == event_id])
    assert json.loads(records[0]["detail"]) == {"node": "i-1"}
    assert records[0]["detail_type"] == "Node Health Event"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", records[0]["time"])


def test_eventbridge_rule_targets_sqs_step_functions_sns_and_lambda(sb: Sandbox) -> None:
    before = sb.metrics()["invocations"]["EchoFunction"]["invocations"]
    flow = sb.stack.arn("FlowStateMachine")
    sfn = sb.client("stepfunctions")
    executions_before = len(sfn.list_executions(stateMachineArn=flow)["executions"])
    entry = {"Source": "fixture.routing", "DetailType": "Route", "Detail": json.dumps({"route": "all"})}
    sb.client("events").put_events(Entries=[entry])
    # SQS target (InputPath $.detail) → WorkerFunction records the body
    assert _eventually(lambda: [r for r in _records(sb, "sqs") if r["body"] == json.dumps({"route": "all"})])
    # SNS target → RecorderFunction receives the whole event as the message
    assert _eventually(lambda: [r for r in _records(sb, "sns") if '"route": "all"' in r["message"]])
    # Step Functions target: an execution with the detail as input
    executions = _eventually(
        lambda: len(sfn.list_executions(stateMachineArn=flow)["executions"]) > executions_before
    )
    assert executions
    assert sb.settle()
    assert sb.metrics()["invocations"]["EchoFunction"]["invocations"] >= before + 1  # Lambda target
    assert not sb.metrics()["delivery_errors"]


def test_schedule_fires_on_demand_and_on_the_clock(sb: Sandbox) -> None:
    count = len(_records(sb, "schedule"))
    sb.fire_schedule("RecorderFunctionSweep")
    assert _eventually(lambda: len(_records(sb, "schedule")) > count)
    with pytest.raises(KeyError):
        sb.fire_schedule("EchoFunction")


def test_schedule_follows_the_sandbox_clock(sb: Sandbox) -> None:
    clock = SandboxClock(speed=0)
    scheduler = Scheduler(sb.stack, clock, sb.region, sb.account_id)
    clock.advance(299)
    scheduler.fire_due()
    assert scheduler.fired == {}
    clock.advance(2)
    scheduler.fire_due()
    assert scheduler.fired == {"RecorderFunctionSweep": 1}
    clock.advance(600)
    scheduler.fire_due()
    assert scheduler.fired == {"RecorderFunctionSweep": 3}


def test_schedule_expressions() -> None:
    assert parse_schedule("rate(5 minutes)") == timedelta(minutes=5)
    assert parse_schedule("rate(1 day)") == timedelta(days=1)
    every_quarter = parse_schedule("cron(0/15 8-17 ? * MON-FRI *)")
    assert not isinstance(every_quarter, timedelta)
    monday = datetime(2026, 1, 5, 8, 30, tzinfo=UTC)
    assert every_quarter.matches(monday)
    assert not every_quarter.matches(monday.replace(minute=31))
    assert not every_quarter.matches(monday.replace(day=4))  # Sunday
    with pytest.raises(ValueError, match="not supported"):
        parse_schedule("cron(0 12 L * ? *)")
    with pytest.raises(ValueError, match="not supported"):
        parse_schedule("at(2026-01-01T00:00:00)")


def test_metrics_count_invocations_and_aws_calls(sb: Sandbox) -> None:
    sb.invoke(
        "WorkerFunction",
        {"Records": [{"messageId": "m1", "body": "metrics", "attributes": {"ApproximateReceiveCount": "1"}}]},
    )
    metrics = sb.metrics()
    assert metrics["invocations"]["WorkerFunction"]["invocations"] >= 1
    # an environment is reused when idle: one cold start per environment ever busy at once
    worker = metrics["invocations"]["WorkerFunction"]
    assert worker["cold_starts"] == worker["peak_concurrent_invocations"] >= 1
    assert metrics["aws_calls"]["dynamodb:PutItem"] >= 1
    assert metrics["deploy_aws_calls"]["lambda:CreateFunction"] == 4
