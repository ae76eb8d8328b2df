"""API Gateway's limits in the local API server: integration timeout, throttling, Lambda's 6 MB response.

AWS's answers: a 504 ``{"message": "Endpoint request timed out"}`` with ``x-amzn-ErrorType:
InternalServerErrorException`` after the 29 s integration timeout; a 429 ``{"message":"Too Many
Requests"}`` (``TooManyRequestsException``) past a token bucket of the stage's MethodSettings or the
account's 10,000 rps / 5,000 burst; a Lambda response over 6,291,556 bytes fails the invocation
(``Function.ResponseSizeTooLarge``) and API Gateway answers 502. Each test runs its own server with a
small setting (a timeout of a fraction of a second, a frozen throttling clock), never a 29 s wait.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.emulator.api_server import ACCOUNT_THROTTLE, INTEGRATION_TIMEOUT_SECONDS, ApiServer
from sandbox.emulator.deploy import Throttle
from sandbox.emulator.lambda_runtime import MAX_RESPONSE_BYTES
from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=3) as running:
        yield running


class FrozenTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def serve(sandbox: Sandbox, **options: object) -> Iterator[str]:
    server = ApiServer(sandbox.stack, sandbox.runtime, port=0, **options)  # type: ignore[arg-type]
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def signed(method: str, url: str) -> requests.Response:
    request = AWSRequest(method=method, url=url)
    SigV4Auth(Credentials("testing", "testing", "testing"), "execute-api", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return requests.request(method, prepared.url, headers=dict(prepared.headers), timeout=10)


def test_the_defaults_are_aws_limits() -> None:
    assert INTEGRATION_TIMEOUT_SECONDS == 29.0
    assert (ACCOUNT_THROTTLE.rate, ACCOUNT_THROTTLE.burst) == (10_000.0, 5_000)
    assert MAX_RESPONSE_BYTES == 6_291_556


def test_a_function_slower_than_the_integration_timeout_is_504_and_runs_on(sandbox: Sandbox) -> None:
    before = sandbox.metrics()["invocations"].get("ApiFunction", {}).get("invocations", 0)
    for url in serve(sandbox, integration_timeout=0.5):
        assert signed("GET", f"{url}/files/slow?seconds=0").status_code == 200  # warm: a cold start is slow
        started = time.monotonic()
        response = signed("GET", f"{url}/files/slow?seconds=2")
        waited = time.monotonic() - started
        assert response.status_code == 504
        assert response.json() == {"message": "Endpoint request timed out"}
        assert response.headers["x-amzn-ErrorType"] == "InternalServerErrorException"
        assert waited < 1.5  # answered at the timeout, not when the function ended
        # the function was not stopped: its invocation ends and counts, as Lambda runs it to its end
        deadline = time.monotonic() + 10
        while sandbox.metrics()["invocations"]["ApiFunction"]["invocations"] < before + 2:
            assert time.monotonic() < deadline, "the timed-out invocation never ended"
            time.sleep(0.05)
        assert sandbox.metrics()["invocations"]["ApiFunction"]["errors"] == 0


def test_a_response_over_lambdas_6_mb_is_502(sandbox: Sandbox) -> None:
    for url in serve(sandbox):
        at_limit = signed("GET", f"{url}/files/huge?bytes={MAX_RESPONSE_BYTES}")
        assert at_limit.status_code == 200
        assert len(at_limit.content) > 6_000_000
        over = signed("GET", f"{url}/files/huge?bytes={MAX_RESPONSE_BYTES + 1}")
        assert over.status_code == 502
        assert over.json() == {"message": "Internal server error"}
        assert over.headers["x-amzn-ErrorType"] == "InternalServerErrorException"
    result = sandbox.runtime.invoke(
        "ApiFunction",
        {"path": "/files/huge", "queryStringParameters": {"bytes": str(MAX_RESPONSE_BYTES + 1)}},
    )
    assert result.function_error == "Unhandled"
    assert result.json()["errorType"] == "Function.ResponseSizeTooLarge"
    assert result.json()["errorMessage"] == (
        "Response payload size exceeded maximum allowed payload size (6291556 bytes)."
    )


def test_throttling_follows_the_stage_method_settings(sandbox: Sandbox) -> None:
    assert sandbox.stack.apis["FixtureApi"].throttling == {("/throttled", "GET"): Throttle(1.0, 2)}
    clock = FrozenTime()
    for url in serve(sandbox, monotonic=clock):
        answers = [requests.get(f"{url}/throttled", timeout=10) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]  # a burst of 2
        assert answers[2].json() == {"message": "Too Many Requests"}
        assert answers[2].headers["x-amzn-ErrorType"] == "TooManyRequestsException"
        assert requests.get(f"{url}/health", timeout=10).status_code == 200  # another method: not throttled
        clock.now += 1.0  # one token a second
        assert requests.get(f"{url}/throttled", timeout=10).status_code == 200
        assert requests.get(f"{url}/throttled", timeout=10).status_code == 429


def test_throttling_falls_back_to_the_accounts_limits(sandbox: Sandbox) -> None:
    clock = FrozenTime()
    for url in serve(sandbox, monotonic=clock, account_throttle=Throttle(rate=2.0, burst=3)):
        statuses = [requests.get(f"{url}/health", timeout=10).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        clock.now += 0.5  # 2 a second: one token back
        assert [requests.get(f"{url}/health", timeout=10).status_code for _ in range(2)] == [200, 429]


def test_the_sandboxs_api_throttles_on_the_sandbox_clock(sandbox: Sandbox) -> None:
    url = sandbox.serve_api(0)
    assert [requests.get(f"{url}/throttled", timeout=10).status_code for _ in range(2)] == [200, 200]
    sandbox.clock.advance(1.0)  # a simulated second refills one token, however little wall time passed
    assert requests.get(f"{url}/throttled", timeout=10).status_code == 200
