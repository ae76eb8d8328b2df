"""The CLI's SigV4 HTTP client (autopilot_cli.client), against a fake API."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from autopilot_cli.client import (
    ApiError,
    AutopilotClient,
    ClientError,
    WaitTimeoutError,
    region_from_endpoint,
)
from botocore.credentials import Credentials

from sandbox.emulator.sigv4 import AuthError, Caller, SigningKey, verify
from tests.unit.cli_fake_api import FakeApi

ENDPOINT = "http://127.0.0.1:3000"
CREDENTIALS = Credentials("AKIDEXAMPLE", "secret", "session-token")
CALLER = Caller("AKIDEXAMPLE", "123456789012", "AIDA", "ann", "arn:aws:iam::123456789012:user/ann")


ACCEPTED = {"operationId": "op-1", "clusterName": "ml-cluster", "status": "RUNNING"}


def make_client(api: FakeApi) -> AutopilotClient:
    return AutopilotClient(ENDPOINT, region="us-east-1", credentials=CREDENTIALS, http=api)  # type: ignore[arg-type]


def operation(status: str = "RUNNING", *steps: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "operationId": "op-1",
        "kind": "CreateCluster",
        "clusterName": "ml-cluster",
        "status": status,
        "createdAt": "2025-11-21T14:00:00Z",
        "updatedAt": steps[-1][1] if steps else "2025-11-21T14:00:00Z",
        "steps": [{"name": n, "enteredAt": t} for n, t in steps],
        "executionArn": "arn:aws:states:us-east-1:123456789012:execution:create:op-1",
        **extra,
    }


def summary(name: str) -> dict[str, Any]:
    return {
        "clusterName": name,
        "status": "ACTIVE",
        "lastOperationId": "op-1",
        "createdAt": "2025-11-21T14:00:00Z",
        "updatedAt": "2025-11-21T14:20:00Z",
    }


# --- signing and transport --------------------------------------------------------------------


def test_requests_are_signed_so_api_gateway_verifies_them() -> None:
    api = FakeApi()
    api.answer("POST", "/clusters", (202, ACCEPTED))

    make_client(api).create_cluster({"owner": "ann"})

    [sent] = api.requests
    caller = verify(
        method=sent["method"],
        url=sent["url"],
        headers=sent["headers"],
        body=sent["body"],
        region="us-east-1",
        lookup=lambda key: SigningKey("secret", CALLER, "session-token") if key == "AKIDEXAMPLE" else None,
    )
    assert caller == CALLER
    assert sent["headers"]["X-Amz-Security-Token"] == "session-token"
    assert "/us-east-1/execute-api/aws4_request" in sent["headers"]["Authorization"]
    with pytest.raises(AuthError):  # a changed byte does not verify
        verify(
            method=sent["method"],
            url=sent["url"],
            headers=sent["headers"],
            body=sent["body"] + b" ",
            region="us-east-1",
            lookup=lambda key: SigningKey("secret", CALLER, "session-token"),
        )


def test_query_strings_and_path_parameters_are_encoded() -> None:
    api = FakeApi()
    api.answer("DELETE", "/clusters/a%2Fb", (202, ACCEPTED))

    make_client(api).delete_cluster("a/b", stack_name="vpc stack")

    assert api.requests[0]["url"] == f"{ENDPOINT}/clusters/a%2Fb?stackName=vpc+stack"


def test_errors_keep_the_message_and_every_located_problem() -> None:
    api = FakeApi()
    problem = {
        "file": "cluster-config.json",
        "path": "InstanceGroups[1].ThreadsPerCore",
        "message": "must be 1 or 2",
    }
    api.answer(
        "POST", "/clusters", (400, {"message": "the cluster configuration is invalid", "errors": [problem]})
    )

    with pytest.raises(ApiError) as raised:
        make_client(api).create_cluster({})

    assert raised.value.status == 400
    assert raised.value.is_client_error
    assert raised.value.errors == [problem]


def test_a_non_json_error_still_reads() -> None:
    api = FakeApi()
    api.answer_from_gateway("GET", "/clusters/x", 502, b"Bad Gateway")

    with pytest.raises(ApiError, match="Bad Gateway") as raised:
        make_client(api).get_cluster("x")

    assert not raised.value.is_client_error


def test_unreachable_endpoint_is_a_client_error() -> None:
    class Down:
        def request(self, *_: Any, **__: Any) -> Any:
            raise urllib3.exceptions.MaxRetryError(None, "/", "connection refused")  # type: ignore[arg-type]

    with pytest.raises(ClientError, match="cannot reach"):
        AutopilotClient(ENDPOINT, region="us-east-1", credentials=CREDENTIALS, http=Down()).list_nodes(
            "x"
        ).__next__()  # type: ignore[arg-type]


def test_credentials_and_region_come_from_the_standard_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")

    client = AutopilotClient(ENDPOINT, http=FakeApi())  # type: ignore[arg-type]

    assert client.region == "eu-west-1"
    assert "Credential=AKIDENV/" in client.signed_request("GET", "/clusters").headers["Authorization"]


def test_missing_region_or_credentials_are_explained(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for variable in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    with pytest.raises(ClientError, match="no AWS region"):
        AutopilotClient(ENDPOINT)
    with pytest.raises(ClientError, match="no AWS credentials"):
        AutopilotClient(ENDPOINT, region="us-east-1")


def test_listing_follows_next_tokens() -> None:
    api = FakeApi()
    api.answer(
        "GET",
        "/clusters",
        (200, {"clusters": [summary("a")], "nextToken": "t1"}),
        (200, {"clusters": [summary("b")], "nextToken": None}),
    )

    names = [c["clusterName"] for c in make_client(api).list_clusters(include_deleted=True)]

    assert names == ["a", "b"]
    assert api.requests[1]["url"].endswith("includeDeleted=true&nextToken=t1")


def test_waiting_stops_at_the_deadline() -> None:
    api = FakeApi()
    api.answer("GET", "/operations/op-1", (200, operation()))
    clock = iter([0.0, 1.0, 5.0, 11.0])
    slept: list[float] = []

    with pytest.raises(WaitTimeoutError, match="still RUNNING"):
        make_client(api).wait_for_operation(
            "op-1", timeout_seconds=10, poll_seconds=4, sleep=slept.append, monotonic=lambda: next(clock)
        )

    assert slept == [4, 4]


# --- the region to sign for -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "region"),
    [
        ("https://abc123.execute-api.eu-west-1.amazonaws.com/Prod", "eu-west-1"),
        ("https://abc123.execute-api.us-gov-west-1.amazonaws.com/Prod/", "us-gov-west-1"),
        ("https://abc123.execute-api.cn-north-1.amazonaws.com.cn/Prod", "cn-north-1"),
        ("https://api.example.com/autopilot", None),
        ("http://127.0.0.1:3000", None),
        ("https://abc123.execute-api.eu-west-1.amazonaws.com.evil.example/Prod", None),
    ],
)
def test_the_region_is_read_from_an_execute_api_host(endpoint: str, region: str | None) -> None:
    assert region_from_endpoint(endpoint) == region


def test_the_endpoint_region_beats_the_profile_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_DEFAULT_REGION=us-west-2 with an eu-west-1 API was a bare 403 (Credential should be scoped
    to a valid region): the signature must carry the API's region."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    endpoint = "https://abc123.execute-api.eu-west-1.amazonaws.com/Prod"

    client = AutopilotClient(endpoint, credentials=CREDENTIALS, http=FakeApi())  # type: ignore[arg-type]
    explicit = AutopilotClient(endpoint, region="us-east-1", credentials=CREDENTIALS, http=FakeApi())  # type: ignore[arg-type]

    assert (
        "/eu-west-1/execute-api/aws4_request"
        in client.signed_request("GET", "/clusters").headers["Authorization"]
    )
    assert explicit.region == "us-east-1"


@contextmanager
def local_api(
    answers: list[tuple[int, bytes]], *, date: str | None = None
) -> Iterator[tuple[AutopilotClient, list[str]]]:
    """A real HTTP server on 127.0.0.1 answering GETs and POSTs with ``answers`` in turn (the last one
    repeated), its Date header ``date`` when given; the client for it, and the paths it was asked (a
    POST's with its Idempotency-Key)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.path = f"{self.path} Idempotency-Key={self.headers.get('Idempotency-Key')}"
            self.do_GET()

        def date_time_string(self, timestamp: float | None = None) -> str:
            return date or super().date_time_string(timestamp)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = AutopilotClient(
            f"http://127.0.0.1:{server.server_address[1]}",
            region="us-east-1",
            credentials=Credentials("AKIDEXAMPLE", "secret"),
        )
        yield client, seen
    finally:
        server.shutdown()


def test_throttling_and_gateway_errors_are_retried_before_they_reach_the_caller() -> None:
    answers = [
        (429, b'{"message": "Too Many Requests"}'),
        (504, b'{"message": "Endpoint request timed out"}'),
        (200, b'{"clusters": []}'),
    ]
    with local_api(answers) as (client, seen):
        assert list(client.list_clusters()) == []
    assert len(seen) == 3


def test_a_create_answered_502_503_504_is_retried_with_its_idempotency_key() -> None:
    # each retry must name the first request's key: the API then answers the operation the first one
    # may have started (issue 20, finding 8), never a second cluster or a 409
    answers = [
        (502, b'{"message": "Internal server error"}'),
        (503, b'{"message": "AWS is busy or unavailable; retry later"}'),
        (504, b'{"message": "Endpoint request timed out"}'),
        (202, b'{"operationId": "op-1", "clusterName": "lab", "status": "RUNNING"}'),
    ]
    with local_api(answers) as (client, seen):
        accepted = client.create_cluster({"clusterConfig": {"ClusterName": "lab"}})
    assert accepted["operationId"] == "op-1"
    assert len(seen) == 4
    assert len(set(seen)) == 1, seen
    assert not seen[0].endswith("Idempotency-Key=None")


def test_the_apis_date_header_is_kept_as_the_servers_now() -> None:
    # a sandbox's API answers on its own clock: --wait measures with it, never with the caller's
    with local_api([(200, b'{"clusters": []}')], date="Sun, 03 Jan 2027 10:00:00 GMT") as (client, _):
        assert client.server_now is None
        list(client.list_clusters())
    assert client.server_now == datetime(2027, 1, 3, 10, 0, tzinfo=UTC)
