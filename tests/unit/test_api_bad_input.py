"""Bad input is a 4xx naming the problem, AWS trouble a 503: the resolver with a fake use-case layer.

No AWS here: body checks answer before any route runs, and the failures of AWS calls are raised by
a stand-in for the use cases' dependencies.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import pytest
from autopilot.api import routes, wiring
from autopilot.api.body import MAX_BODY_BYTES, MAX_DEPTH
from autopilot.errors import NotFoundError
from autopilot.observability import logger
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyPersistenceLayerError
from botocore.exceptions import ClientError, EndpointConnectionError

from tests.samples import api_event, create_body


@dataclass
class LambdaContext:
    function_name: str = "ApiFunction"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:ApiFunction"
    aws_request_id: str = "52fdfc07-2182-154f-163f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        return 25_000


class FakeDependencies:
    """Each use case raises what the test set (on its first use of a dependency), or NotFoundError:
    proof that the request got through."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or NotFoundError("reached the use case")

    def __getattr__(self, name: str) -> Any:
        raise self.error


@pytest.fixture
def operations(monkeypatch: pytest.MonkeyPatch) -> FakeDependencies:
    fake = FakeDependencies()
    monkeypatch.setattr(wiring, "deps", lambda: fake)
    return fake


def call(event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    response = routes.app.resolve(event, cast(Any, LambdaContext()))
    headers = {k: v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()}
    headers.update(response.get("headers") or {})
    body = response["body"]
    return response["statusCode"], headers, json.loads(body) if body else None


def with_body(
    raw: str, *, route: str = "create_cluster", content_type: str | None = "application/json"
) -> dict[str, Any]:
    event = api_event(route, raw_body=raw)
    if content_type is None:
        del event["headers"]["Content-Type"]
    else:
        event["headers"]["Content-Type"] = content_type
    return event


def binary(raw: bytes, *, route: str = "create_cluster") -> dict[str, Any]:
    event = with_body(base64.b64encode(raw).decode(), route=route)
    event["isBase64Encoded"] = True
    return event


def client_error(code: str, status: int = 400, **extra: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": code},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(cast(Any, response), "Query")


VALID = json.dumps(create_body())
NESTED = "[" * 10_000 + "]" * 10_000
JUST_TOO_DEEP = json.dumps({"clusterConfig": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)})


# --- 400: the body is not JSON the API can hold ------------------------------------------------


@pytest.mark.parametrize("route", ["create_cluster", "validate"])
@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (lambda r: binary(b'{"owner": "\xff\xfe"}', route=r), "not valid UTF-8"),
        (lambda r: with_body('{"owner": "\udcff"}', route=r), "not valid UTF-8"),
        (lambda r: with_body('{"owner": "\\ud800"}', route=r), "lone surrogate"),
        (lambda r: with_body(NESTED, route=r), f"deeper than {MAX_DEPTH} levels"),
        (lambda r: with_body(JUST_TOO_DEEP, route=r), f"deeper than {MAX_DEPTH} levels"),
        (lambda r: with_body('{"clusterConfig": ' + "9" * 5000 + "}", route=r), "number of 5000 characters"),
        (lambda r: with_body('{"budget": {"monthlyLimitUsd": 1e999}}', route=r), "out of range"),
        (lambda r: with_body('{"budget": {"monthlyLimitUsd": NaN}}', route=r), "NaN is not a JSON value"),
        (lambda r: with_body("{not json", route=r), "not valid JSON"),
    ],
    ids=[
        "binary",
        "raw-surrogate",
        "escaped-surrogate",
        "10k-deep",
        "65-deep",
        "5000-digits",
        "1e999",
        "NaN",
        "syntax",
    ],
)
def test_a_body_the_api_cannot_hold_is_400_naming_the_problem(
    operations: FakeDependencies, route: str, event: Callable[[str], dict[str, Any]], problem: str
) -> None:
    status, _, answer = call(event(route))

    assert status == 400
    [error] = answer["errors"]
    assert error["location"] == "body"
    assert problem in error["message"]


def test_a_body_as_deep_as_allowed_passes_the_checks(operations: FakeDependencies) -> None:
    inner = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    status, _, answer = call(with_body('{"clusterConfig": ' + inner + "}", route="validate"))

    assert status == 400
    assert {e["path"] for e in answer["errors"]} == {"clusterConfig"}  # the model's check, not the depth


def test_a_body_over_the_limit_is_413(operations: FakeDependencies) -> None:
    padding = "x" * MAX_BODY_BYTES
    status, _, answer = call(with_body(json.dumps({"owner": padding})))

    assert status == 413
    assert str(MAX_BODY_BYTES) in answer["message"]


# --- 415: bodies must be JSON -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("text/plain", VALID),
        (
            "multipart/form-data; boundary=x",
            '--x\r\nContent-Disposition: form-data; name="owner"\r\n\r\nann\r\n--x--',
        ),
        ("multipart/form-data", VALID),  # no boundary: Powertools' parser raises ValueError
        ("application/x-www-form-urlencoded", "owner=ann&project=p"),
        ("application/json; charset=latin-1", VALID),
        ("application/json-seq", VALID),
        ("application/xml", "<a/>"),
    ],
)
def test_a_body_that_is_not_json_is_415(operations: FakeDependencies, content_type: str, raw: str) -> None:
    status, _, answer = call(with_body(raw, content_type=content_type))

    assert status == 415
    assert content_type in answer["message"]
    assert answer["errors"] == [
        {"location": "header", "path": "Content-Type", "message": "unsupported media type"}
    ]


# Powertools compares the media type case-sensitively: `Application/JSON` is refused (415).
@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=UTF-8", None])
def test_json_bodies_reach_the_use_case(operations: FakeDependencies, content_type: str | None) -> None:
    status, _, answer = call(with_body(VALID, content_type=content_type))

    assert (status, answer["message"]) == (404, "reached the use case")


# --- 503: AWS still failing after boto3's retries ----------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        client_error("ThrottlingException"),
        client_error("ProvisionedThroughputExceededException"),
        client_error("InternalFailure", status=500),
        client_error(
            "TransactionCanceledException",
            CancellationReasons=[{"Code": "None"}, {"Code": "ThrottlingError"}],
        ),
        EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com"),
    ],
    ids=["throttling", "dynamodb-capacity", "5xx", "transaction-throttled", "no-connection"],
)
def test_aws_throttling_or_failing_after_retries_is_503_with_retry_after(
    operations: FakeDependencies, error: Exception
) -> None:
    operations.error = error

    status, headers, answer = call(api_event("list_clusters", query=None))

    assert status == 503
    assert int(headers["Retry-After"]) > 0
    assert answer == {"message": "AWS is busy or unavailable; retry later"}


def test_a_wrapped_throttle_is_503_too(operations: FakeDependencies) -> None:
    try:
        raise client_error("ThrottlingException")
    except ClientError as cause:
        try:
            raise IdempotencyPersistenceLayerError("Failed to save in progress record", cause) from cause
        except IdempotencyPersistenceLayerError as wrapped:
            operations.error = wrapped

    status, headers, _ = call(with_body(VALID))

    assert status == 503
    assert "Retry-After" in headers


def test_other_aws_errors_stay_500_and_are_logged(
    operations: FakeDependencies, monkeypatch: pytest.MonkeyPatch
) -> None:
    operations.error = client_error("AccessDeniedException")
    logged: list[str] = []
    monkeypatch.setattr(logger, "exception", lambda message, **_: logged.append(message))

    status, headers, answer = call(api_event("list_clusters", query=None))

    assert (status, answer) == (500, {"message": "internal error"})
    assert "Retry-After" not in headers
    assert logged == ["unhandled error"]


# --- page tokens ------------------------------------------------------------------------------


def test_a_node_page_token_sagemaker_refuses_is_400(operations: FakeDependencies) -> None:
    operations.error = client_error("ValidationException")
    event = api_event("list_cluster_nodes", path_parameters={"name": "c1"}, query={"nextToken": "forged"})

    status, _, answer = call(event)

    assert status == 400
    assert answer["errors"] == [{"location": "query", "path": "nextToken", "message": "invalid page token"}]


@pytest.mark.parametrize(("route", "longest"), [("list_clusters", 1024), ("list_cluster_nodes", 8192)])
def test_an_overlong_page_token_is_400(operations: FakeDependencies, route: str, longest: int) -> None:
    event = api_event(route, path_parameters={"name": "c1"}, query={"nextToken": "a" * (longest + 1)})

    status, _, answer = call(event)

    assert status == 400
    assert [e["path"] for e in answer["errors"]] == ["nextToken"]


def test_a_unicode_error_that_is_not_the_body_stays_500(operations: FakeDependencies) -> None:
    operations.error = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    status, _, answer = call(binary(VALID.encode()))

    assert (status, answer) == (500, {"message": "internal error"})
