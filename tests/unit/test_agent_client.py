"""The agent's round trip: retries with backoff, clock-skew correction against API Gateway's own SigV4
check (the sandbox's verifier, over real HTTP), instance credentials from IMDSv2, and the entry point."""

from __future__ import annotations

import email.utils
import http.server
import json
import os
import signal
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from autopilot_agent import __main__ as entry
from autopilot_agent.client import ApiError, ReportClient, Response
from autopilot_agent.config import Config
from autopilot_agent.credentials import CredentialsError, CredentialSource

from sandbox.emulator.sigv4 import AuthError, Caller, SigningKey, verify
from tests.unit.agent_fakes import FakeApi, make_client

REPORT = {"agentVersion": "1.0.0", "nodes": [], "results": []}


def test_throttling_server_errors_and_lost_connections_are_retried_with_backoff() -> None:
    api = FakeApi()
    api.failures = [
        Response(429, {}, b'{"message": "Too Many Requests"}'),
        Response(502, {}, b'{"message": "Internal server error"}'),
        ConnectionResetError("reset by peer"),
    ]
    sleeps: list[float] = []

    answer = make_client(api, sleeps).send(REPORT)

    assert answer == {"commands": [], "pollSeconds": 10}
    assert sleeps == [1.0, 2.0, 4.0]  # capped exponential, times the jitter (1.0 here)


def test_retries_end_with_the_last_error() -> None:
    api = FakeApi()
    api.failures = [Response(503, {}, b'{"message": "Service Unavailable"}')] * 9
    sleeps: list[float] = []

    with pytest.raises(ApiError, match="HTTP 503: Service Unavailable") as raised:
        make_client(api, sleeps, backoff_cap=3.0).send(REPORT)

    assert raised.value.status == 503
    assert sleeps == [1.0, 2.0, 3.0, 3.0]  # five attempts
    assert api.failures  # nothing more was tried


@pytest.mark.parametrize("status", [400, 403, 404, 409])
def test_a_refusal_is_not_retried(status: int) -> None:
    api = FakeApi()
    api.failures = [Response(status, {}, b'{"message": "no"}')]
    sleeps: list[float] = []

    with pytest.raises(ApiError, match="no"):
        make_client(api, sleeps).send(REPORT)

    assert (sleeps, len(api.requests)) == ([], 1)


def test_expired_instance_credentials_are_fetched_again_once() -> None:
    api = FakeApi()
    api.failures = [
        Response(
            403,
            {"x-amzn-ErrorType": "ExpiredTokenException"},
            b'{"message": "The security token is expired"}',
        )
    ]
    client = make_client(api)
    invalidated: list[bool] = []
    client.credentials.invalidate = lambda: invalidated.append(True)  # type: ignore[method-assign]

    client.send(REPORT)

    assert invalidated == [True]
    assert len(api.requests) == 2


# clock skew, against the sandbox's API Gateway SigV4 check over real HTTP ---------------------------
@pytest.fixture
def gateway() -> Iterator[dict[str, Any]]:
    """A local API: verifies each request's SigV4 as API Gateway does, on a clock 20 minutes ahead of
    the agent's; 200 {"commands": []} or API Gateway's 403."""
    state: dict[str, Any] = {"now": datetime(2026, 11, 27, 21, 20, tzinfo=UTC), "amz_dates": []}
    key = SigningKey(
        "secret", Caller("AKIDEXAMPLE", "123456789012", "x", "x", "arn:aws:iam::123456789012:root")
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state["amz_dates"].append(self.headers["X-Amz-Date"])
            try:
                verify(
                    method="POST",
                    url=f"http://{self.headers['Host']}{self.path}",
                    headers=dict(self.headers.items()),
                    body=body,
                    region="us-west-2",
                    lookup=lambda access_key: key if access_key == "AKIDEXAMPLE" else None,
                    now=state["now"],
                )
            except AuthError as error:
                self._answer(error.status, {"message": error.message}, error.error_type)
            else:
                self._answer(200, {"commands": [], "pollSeconds": 10})

        def _answer(self, status: int, body: dict[str, Any], error_type: str | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            if error_type:
                self.send_header("x-amzn-ErrorType", error_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def date_time_string(self, timestamp: float | None = None) -> str:
            return email.utils.format_datetime(state["now"], usegmt=True)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/Prod"
    yield state
    server.shutdown()
    server.server_close()


def test_a_skewed_clock_is_corrected_from_the_date_header_and_the_report_signed_again(
    gateway: dict[str, Any],
) -> None:
    node_clock = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)  # 20 minutes behind the API
    client = ReportClient(
        Config(gateway["url"], "us-west-2", "ml-cluster", 10.0),
        CredentialSource(environ={"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}),
        now=lambda: node_clock,
        sleep=lambda _: None,
    )

    assert client.send(REPORT) == {"commands": [], "pollSeconds": 10}
    assert gateway["amz_dates"] == ["20261127T210000Z", "20261127T212000Z"]
    assert client.clock_offset == timedelta(minutes=20)

    client.send(REPORT)  # later reports are signed right the first time
    assert gateway["amz_dates"][2:] == ["20261127T212000Z"]


def test_a_wrong_signature_is_not_mistaken_for_skew(gateway: dict[str, Any]) -> None:
    gateway["now"] = datetime.now(UTC)
    client = ReportClient(
        Config(gateway["url"], "us-west-2", "ml-cluster", 10.0),
        CredentialSource(environ={"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wrong"}),
        sleep=lambda _: None,
    )

    with pytest.raises(ApiError, match="HTTP 403: The request signature we calculated does not match"):
        client.send(REPORT)
    assert len(gateway["amz_dates"]) == 1


# instance credentials (IMDSv2) -----------------------------------------------------------------------
@pytest.fixture
def imds() -> Iterator[dict[str, Any]]:
    """A local instance metadata service: IMDSv2 only (a GET without the session token gets 401)."""
    state: dict[str, Any] = {"served": 0, "expires": "2026-11-27T22:00:00Z", "calls": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            state["calls"].append(("PUT", self.path))
            assert self.headers["X-aws-ec2-metadata-token-ttl-seconds"] == "21600"
            self._answer(200, "imds-token")

        def do_GET(self) -> None:
            state["calls"].append(("GET", self.path))
            if self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
                self._answer(401, "")
            elif self.path == "/latest/meta-data/iam/security-credentials/":
                self._answer(200, "ml-cluster-controller-role")
            elif self.path == "/latest/meta-data/iam/security-credentials/ml-cluster-controller-role":
                state["served"] += 1
                document = {
                    "Code": "Success",
                    "AccessKeyId": f"ASIA{state['served']}",
                    "SecretAccessKey": "secret",
                    "Token": "token",
                    "Expiration": state["expires"],
                }
                self._answer(200, json.dumps(document))
            else:
                self._answer(404, "")

        def _answer(self, status: int, text: str) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    state["endpoint"] = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


def test_instance_credentials_come_from_imdsv2_and_are_fetched_again_before_they_expire(
    imds: dict[str, Any],
) -> None:
    clock = [datetime(2026, 11, 27, 21, 0, tzinfo=UTC)]
    source = CredentialSource(
        environ={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds["endpoint"]}, now=lambda: clock[0]
    )

    first = source.get()
    assert (first.access_key, first.secret_key, first.token) == ("ASIA1", "secret", "token")
    assert first.expires == datetime(2026, 11, 27, 22, 0, tzinfo=UTC)
    clock[0] += timedelta(minutes=49)
    assert source.get().access_key == "ASIA1"  # cached: 11 minutes left
    clock[0] += timedelta(minutes=2)
    assert source.get().access_key == "ASIA2"  # 9 minutes left: fetched again
    assert imds["calls"][0] == ("PUT", "/latest/api/token")


def test_environment_credentials_win_over_the_instance_role(imds: dict[str, Any]) -> None:
    source = CredentialSource(
        environ={
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds["endpoint"],
            "AWS_ACCESS_KEY_ID": "AKIDENV",
            "AWS_SECRET_ACCESS_KEY": "s",
        }
    )

    assert source.get().access_key == "AKIDENV"
    assert imds["calls"] == []


def test_no_metadata_service_is_a_credentials_error(tmp_path: Path) -> None:
    source = CredentialSource(
        environ={"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9"}, timeout=0.5
    )

    with pytest.raises(CredentialsError, match="instance metadata service"):
        source.get()


# the entry point --------------------------------------------------------------------------------------
@pytest.fixture
def agent_env(gateway: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    gateway["now"] = datetime.now(UTC)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"apiUrl": gateway["url"], "region": "us-west-2", "clusterName": "ml-cluster"})
    )
    monkeypatch.setenv("AUTOPILOT_AGENT_CONFIG", str(config))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm commands: the agent reports no nodes, fast
    return gateway


def test_once_reports_and_exits_zero(agent_env: dict[str, Any]) -> None:
    assert entry.main(["--once"]) == 0
    assert len(agent_env["amz_dates"]) == 1


def test_once_exits_non_zero_when_the_report_is_refused(
    agent_env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")

    assert entry.main(["--once"]) == 1


def test_a_bad_config_exits_two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_AGENT_CONFIG", str(tmp_path / "absent.json"))

    assert entry.main([]) == 2


def test_sigterm_stops_the_service_cleanly(agent_env: dict[str, Any]) -> None:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        assert entry.main([]) == 0  # returns (the loop was waiting out its 10 s poll)
    finally:
        timer.cancel()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert len(agent_env["amz_dates"]) == 1
