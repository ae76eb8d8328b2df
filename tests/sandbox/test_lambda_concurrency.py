"""Lambda as AWS runs it: invocations at once, the function's Timeout, reserved concurrency, the
concurrency metric (issue 19 item 9). The runtime on its own, then the product's template deployed."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from moto.dynamodb.responses import DynamoHandler

from sandbox.emulator.deploy import FunctionSpec
from sandbox.emulator.invocation import CURRENT_FUNCTION
from sandbox.emulator.lambda_runtime import FunctionThrottled, LambdaRuntime
from sandbox.harness.core import Sandbox

EVENTS = Path(__file__).resolve().parents[2] / "events"

# Stays in the handler until the test creates <gate>/release; counts its runs in <gate>/runs.
_GATED = """
import pathlib, time

def handler(event, context):
    gate = pathlib.Path(event["gate"])
    with (gate / "runs").open("a") as runs:
        runs.write("run\\n")
    (gate / "running").touch()
    while not (gate / "release").exists():
        time.sleep(0.01)
    (gate / "finished").touch()
    return {"remaining_ms": context.get_remaining_time_in_millis()}
"""


def _gated(
    tmp_path: Path, *, timeout: int = 60, reserved: int | None = None, retries: int = 2
) -> FunctionSpec:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "gated_app.py").write_text(_GATED)
    return FunctionSpec(
        logical_id="GatedFunction",
        name="gated-function",
        arn="arn:aws:lambda:us-east-1:123456789012:function:gated-function",
        handler="gated_app.handler",
        runtime="python3.12",
        code_dir=code,
        layer_dirs=[],
        environment={},
        timeout=timeout,
        memory_size=128,
        max_async_retries=retries,
        reserved_concurrency=reserved,
    )


def _eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return value


@pytest.fixture
def runtime() -> Iterator[LambdaRuntime]:
    running = LambdaRuntime(region="us-east-1", retry_delay=lambda seconds: 0.05)
    yield running
    running.stop()


def _runs(gate: Path) -> int:
    return len((gate / "runs").read_text().splitlines()) if (gate / "runs").exists() else 0


# --- the function's Timeout ------------------------------------------------------------------------
def test_an_invocation_past_its_timeout_fails_and_its_environment_is_killed(
    tmp_path: Path, runtime: LambdaRuntime
) -> None:
    runtime.register(_gated(tmp_path, timeout=1))
    started = time.monotonic()
    result = runtime.invoke("GatedFunction", {"gate": str(tmp_path)})
    assert 1.0 <= time.monotonic() - started < 5.0  # ended at the timeout, not when the handler would
    assert result.function_error == "Unhandled"
    assert result.json() == {
        "errorType": "Sandbox.Timedout",
        "errorMessage": f"RequestId: {result.request_id} Error: Task timed out after 1.00 seconds",
        "requestId": result.request_id,
    }
    (tmp_path / "release").touch()
    time.sleep(0.3)
    assert not (tmp_path / "finished").exists()  # killed: the handler never went on past its timeout
    # the next invocation gets a new environment (a cold start), never the killed one
    assert runtime.invoke("GatedFunction", {"gate": str(tmp_path)}).ok
    metrics = runtime.metrics()["GatedFunction"]
    assert (metrics["timeouts"], metrics["cold_starts"], metrics["invocations"]) == (1, 2, 2)


def test_a_timed_out_async_invocation_is_retried_as_lambda_retries_events(
    tmp_path: Path, runtime: LambdaRuntime
) -> None:
    runtime.register(_gated(tmp_path, timeout=1, retries=1))
    runtime.invoke_async("GatedFunction", {"gate": str(tmp_path)})
    assert runtime.dispatcher.wait_idle(15)
    assert _runs(tmp_path) == 2  # the attempt and MaximumRetryAttempts (1) retry, each timed out
    assert runtime.metrics()["GatedFunction"]["timeouts"] == 2


def test_init_and_unmarshal_errors_are_answered_at_once_not_as_timeouts(
    tmp_path: Path, runtime: LambdaRuntime
) -> None:
    spec = _gated(tmp_path, timeout=1)
    (spec.code_dir / "gated_app.py").write_text("raise RuntimeError('broken at import')\n")
    runtime.register(spec)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch at every chance: the caller wakes as the environment answers
    try:
        for _ in range(50):
            result = runtime.invoke("GatedFunction", {})
            assert result.json()["errorType"] == "Runtime.ImportModuleError"  # never taken for a timeout
    finally:
        sys.setswitchinterval(interval)
    assert runtime.invoke("GatedFunction", b"{not json").json()["errorType"] == "Runtime.UnmarshalError"
    metrics = runtime.metrics()["GatedFunction"]
    assert (metrics["timeouts"], metrics["errors"]) == (0, 51)


# --- reserved concurrency ----------------------------------------------------------------------------
def test_reserved_concurrency_throttles_sync_and_queues_async_invocations(
    tmp_path: Path, runtime: LambdaRuntime
) -> None:
    runtime.register(_gated(tmp_path, reserved=1))
    first = threading.Thread(target=runtime.invoke, args=("GatedFunction", {"gate": str(tmp_path)}))
    first.start()
    try:
        assert _eventually((tmp_path / "running").exists)
        with pytest.raises(FunctionThrottled, match=r"^Rate Exceeded\.$"):
            runtime.invoke("GatedFunction", {"gate": str(tmp_path)})
        runtime.invoke_async("GatedFunction", {"gate": str(tmp_path)})  # throttled: back to Lambda's queue
        assert _eventually(lambda: runtime.metrics()["GatedFunction"]["throttles"] >= 2)
        assert _runs(tmp_path) == 1
    finally:
        (tmp_path / "release").touch()
        first.join(10)
    assert runtime.dispatcher.wait_idle(15)
    assert _runs(tmp_path) == 2  # the queued event ran once a concurrency slot was free
    metrics = runtime.metrics()["GatedFunction"]
    assert metrics["peak_concurrent_invocations"] == 1
    assert metrics["errors"] == 0  # a throttle is not a failed invocation


# --- the product's functions at once -------------------------------------------------------------------
@pytest.fixture(scope="module")
def product() -> Iterator[Sandbox]:
    """The real template on a frozen clock; SQS polled by the test."""
    with Sandbox(speed=0, background=False, schedules=False, seed=9) as sandbox:
        yield sandbox


def _state_change(status: str) -> str:
    event = json.loads((EVENTS / "hyperpod" / "cluster_state_change.json").read_text())
    event["id"] = f"race-{status}"
    event["detail"]["ClusterStatus"] = status
    # from the sandbox's own account and region: an event of another is dropped before any read
    event["account"], event["region"] = "123456789012", "us-east-1"
    return json.dumps(event)


def test_two_cluster_events_invocations_overlap(product: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two SQS batches of AWS's Cluster State Change sample reach ClusterEventsFunction one after the
    other; the first waits at a barrier as its first DynamoDB request reaches moto (before the lock that
    makes moto's DynamoDB atomic) until the second arrives there too, which only happens if both run at
    once (the global lock of before made it time out)."""
    barrier = threading.Barrier(2, timeout=30)
    passed: set[int] = set()
    original = DynamoHandler.call_action

    def call_action(self: DynamoHandler) -> Any:
        running = CURRENT_FUNCTION.get()
        in_cluster_events = running is not None and running.logical_id == "ClusterEventsFunction"
        if in_cluster_events and threading.get_ident() not in passed:
            passed.add(threading.get_ident())
            barrier.wait()
        return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", call_action)
    sqs = product.client("sqs")
    queue = product.stack.physical_id("ClusterEventsQueue")
    sqs.send_message(QueueUrl=queue, MessageBody=_state_change("Creating"))
    assert product.poller.poll_once(wait=False) == 1  # the first batch runs (and waits at the barrier)
    sqs.send_message(QueueUrl=queue, MessageBody=_state_change("InService"))
    assert product.poller.poll_once(wait=False) == 1  # a second poller takes the second message meanwhile
    assert product.settle(60)
    assert len(passed) == 2
    assert not barrier.broken
    metrics = product.metrics()["invocations"]["ClusterEventsFunction"]
    assert metrics["peak_concurrent_invocations"] == 2
    assert metrics["errors"] == 0
    attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert (
        attributes["ApproximateNumberOfMessages"]
        == attributes["ApproximateNumberOfMessagesNotVisible"]
        == "0"
    )


def test_metrics_endpoint_reports_peak_concurrency(product: Sandbox) -> None:
    status, body = product.admin("GET", "metrics", None)
    assert status == 200
    assert body["invocations"]["ClusterEventsFunction"]["peak_concurrent_invocations"] >= 1


def test_a_throttled_invoke_is_lambdas_429(product: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = product.stack.function("RecordOutcomeFunction")
    monkeypatch.setattr(product.runtime.spec(spec.logical_id), "reserved_concurrency", 0)
    with pytest.raises(ClientError) as raised:
        product.client("lambda").invoke(FunctionName=spec.name, Payload=b"{}")
    error = raised.value.response
    assert error["Error"]["Code"] == "TooManyRequestsException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert error.get("Reason") == "ReservedFunctionConcurrentInvocationLimitExceeded"  # botocore: a member


def test_a_throttled_api_function_is_api_gateways_500(
    product: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(product.runtime.spec("ApiFunction"), "reserved_concurrency", 0)
    url = product.serve_api(0)
    request = AWSRequest(method="GET", url=f"{url}/clusters")
    SigV4Auth(Credentials("testing", "testing", "testing"), "execute-api", product.region).add_auth(request)
    prepared = request.prepare()
    response = requests.get(prepared.url, headers=dict(prepared.headers), timeout=30)
    assert response.status_code == 500
    assert response.json() == {"message": "Internal server error"}
    assert response.headers["x-amzn-ErrorType"] == "InternalServerErrorException"


def test_a_handler_module_is_found_by_name_as_on_lambda(product: Sandbox) -> None:
    # CostTaggerFunction's module-level TypeAdapter resolves its models through sys.modules["app"]:
    # loaded outside sys.modules, it answered PydanticUserError ("is not fully defined")
    result = product.invoke("CostTaggerFunction", {"action": "tag-cluster", "clusterName": "absent"})
    assert result.json()["errorType"] == "ValueError", result.json()
    assert result.json()["errorMessage"] == "cluster 'absent' is not registered"
