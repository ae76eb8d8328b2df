"""The SigV4 HTTP client and the `autopilot clusters|operations` commands, against a fake API."""

from __future__ import annotations

import argparse
import io
import json
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3
from autopilot import client_cli
from autopilot.client import ApiError, AutopilotClient, ClientError, WaitTimeoutError
from botocore.credentials import Credentials

from sandbox.sigv4 import AuthError, Caller, SigningKey, verify
from tests.events import create_body

ENDPOINT = "http://127.0.0.1:3000"
CREDENTIALS = Credentials("AKIDEXAMPLE", "secret", "session-token")
CALLER = Caller("AKIDEXAMPLE", "123456789012", "AIDA", "ann", "arn:aws:iam::123456789012:user/ann")


@dataclass
class Answer:
    status: int
    data: bytes


@dataclass
class FakeApi:
    """Answers (method, path) with queued (status, body) pairs; keeps every request it got."""

    routes: dict[tuple[str, str], deque[tuple[int, Any]]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, method: str, path: str, *answers: tuple[int, Any]) -> None:
        self.routes.setdefault((method, path), deque()).extend(answers)

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], timeout: float
    ) -> Answer:
        self.requests.append({"method": method, "url": url, "body": body or b"", "headers": headers})
        queue = self.routes.get((method, urlsplit(url).path))
        if not queue:
            return Answer(404, b'{"message": "no such resource"}')
        status, payload = queue[0] if len(queue) == 1 else queue.popleft()
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return Answer(status, data)


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


# --- signing and transport --------------------------------------------------------------------


def test_requests_are_signed_so_api_gateway_verifies_them() -> None:
    api = FakeApi()
    api.answer("POST", "/clusters", (202, {"operationId": "op-1"}))

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
    api.answer("DELETE", "/clusters/a%2Fb", (202, {"operationId": "op-2"}))

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
    api.answer("GET", "/clusters/x", (502, b"Bad Gateway"))

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
        (200, {"clusters": [{"clusterName": "a"}], "nextToken": "t1"}),
        (200, {"clusters": [{"clusterName": "b"}], "nextToken": None}),
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


# --- the commands -----------------------------------------------------------------------------


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()

    def client(endpoint: str, *, region: str | None = None) -> AutopilotClient:
        assert endpoint == ENDPOINT
        return AutopilotClient(endpoint, region=region or "us-east-1", credentials=CREDENTIALS, http=fake)  # type: ignore[arg-type]

    monkeypatch.setattr(client_cli, "AutopilotClient", client)
    monkeypatch.setenv(client_cli.ENDPOINT_ENV, ENDPOINT)
    return fake


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="autopilot")
    client_cli.add_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def config_files(tmp_path: Any) -> dict[str, str]:
    body = create_body()
    (tmp_path / "cluster-config.json").write_text(json.dumps(body["clusterConfig"]))
    (tmp_path / "provisioning.json").write_text(json.dumps(body["provisioningParameters"]))
    return {
        "config": str(tmp_path / "cluster-config.json"),
        "provisioning": str(tmp_path / "provisioning.json"),
    }


def test_create_sends_the_request_body_and_prints_the_operation(
    api: FakeApi, config_files: dict[str, str]
) -> None:
    api.answer(
        "POST", "/clusters", (202, {"operationId": "op-1", "clusterName": "ml-cluster", "status": "RUNNING"})
    )

    code, out, _ = run(
        "clusters", "create", "--cluster-config", config_files["config"],
        "--provisioning-parameters", config_files["provisioning"], "--owner", "ann", "--project", "llm",
        "--budget-usd", "100", "--alert-email", "ann@example.com",
    )  # fmt: skip

    assert code == 0
    sent = json.loads(api.requests[0]["body"])
    assert sent["owner"] == "ann"
    assert sent["budget"] == {"monthlyLimitUsd": 100.0, "alertEmails": ["ann@example.com"]}
    assert sent["clusterConfig"]["ClusterName"] == "ml-cluster"
    assert "operation op-1 accepted" in out
    assert "autopilot operations get op-1 --wait" in out


def test_each_invocation_sends_its_own_signed_idempotency_key(
    api: FakeApi, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, {"operationId": "op-1", "clusterName": "ml-cluster"}))
    api.answer("DELETE", "/clusters/ml-cluster", (202, {"operationId": "op-2", "clusterName": "ml-cluster"}))
    create = (
        "clusters",
        "create",
        "--cluster-config",
        config_files["config"],
        "--owner",
        "a",
        "--project",
        "p",
    )

    run(*create)
    run(*create)
    run(*create, "--idempotency-key", "retry-of-yesterday")
    run("clusters", "delete", "ml-cluster")
    run("clusters", "delete", "ml-cluster", "--idempotency-key", "del-1")

    keys = [r["headers"]["Idempotency-Key"] for r in api.requests]
    assert keys[0] != keys[1]
    assert keys[3] not in keys[:2]
    assert str(uuid.UUID(keys[0])) == keys[0]
    assert keys[2] == "retry-of-yesterday"
    assert keys[4] == "del-1"
    assert all("idempotency-key" in r["headers"]["Authorization"] for r in api.requests)  # signed


def test_create_shows_each_problem_the_api_found(api: FakeApi, config_files: dict[str, str]) -> None:
    api.answer(
        "POST",
        "/clusters",
        (
            400,
            {
                "message": "the cluster configuration is invalid",
                "errors": [
                    {
                        "file": "cluster-config.json",
                        "path": "InstanceGroups[1].ThreadsPerCore",
                        "message": "must be 1 or 2",
                    },
                    {"location": "body", "path": "owner", "message": "Field required"},
                ],
            },
        ),
    )

    code, _, err = run(
        "clusters", "create", "--cluster-config", config_files["config"], "--owner", "a", "--project", "p"
    )

    assert code == 1
    assert "error: the cluster configuration is invalid (HTTP 400)" in err
    assert "  cluster-config.json: InstanceGroups[1].ThreadsPerCore: must be 1 or 2" in err
    assert "  body: owner: Field required" in err


def test_create_waits_with_step_progress(api: FakeApi, config_files: dict[str, str]) -> None:
    api.answer(
        "POST", "/clusters", (202, {"operationId": "op-1", "clusterName": "ml-cluster", "status": "RUNNING"})
    )
    api.answer(
        "GET",
        "/operations/op-1",
        (200, operation("RUNNING", ("Create Cluster", "2025-11-21T14:00:00Z"))),
        (
            200,
            operation(
                "RUNNING",
                ("Create Cluster", "2025-11-21T14:00:00Z"),
                ("Wait For Cluster", "2025-11-21T14:00:05Z"),
            ),
        ),
        (
            200,
            operation(
                "SUCCEEDED",
                ("Create Cluster", "2025-11-21T14:00:00Z"),
                ("Wait For Cluster", "2025-11-21T14:00:05Z"),
                ("Succeeded", "2025-11-21T14:21:10Z"),
            ),
        ),
    )

    code, out, _ = run(
        "clusters", "create", "--cluster-config", config_files["config"], "--owner", "a", "--project", "p",
        "--wait", "--poll", "0",
    )  # fmt: skip

    assert code == 0
    lines = out.splitlines()
    assert "  > Create Cluster" in lines
    assert "  > Wait For Cluster" in lines
    assert "    done in 5s" in lines
    assert "SUCCEEDED" in lines
    assert "  Wait For Cluster         21m05s" in lines


def test_waiting_on_a_failed_operation_exits_1_with_the_cause(api: FakeApi) -> None:
    failed = operation(
        "FAILED", ("Delete Cluster", "2025-11-21T14:00:00Z"), ("Failed", "2025-11-21T15:00:00Z"),
        error={"error": "Autopilot.Timeout", "cause": "cluster x was still Deleting after 120 polls 30 s apart"},  # noqa: E501
    )  # fmt: skip
    api.answer("GET", "/operations/op-1", (200, failed))

    code, out, err = run("operations", "get", "op-1", "--wait", "--poll", "0")

    assert code == 1
    assert "error: Autopilot.Timeout: cluster x was still Deleting after 120 polls 30 s apart" in err
    assert "  Delete Cluster           1h00m00s" in out


def test_wait_deadline_exits_3(api: FakeApi) -> None:
    api.answer("GET", "/operations/op-1", (200, operation()))

    code, _, err = run("operations", "get", "op-1", "--wait", "--poll", "0", "--timeout", "0")

    assert code == 3
    assert "still RUNNING at the deadline" in err


def test_operation_get_prints_record_and_json(api: FakeApi) -> None:
    done = operation(
        "SUCCEEDED", ("Delete Cluster", "2025-11-21T14:00:00Z"), ("Succeeded", "2025-11-21T14:03:00Z"),
        leftovers=["arn:aws:s3:::bucket"],
    )  # fmt: skip
    api.answer("GET", "/operations/op-1", (200, done))

    code, out, _ = run("operations", "get", "op-1")
    json_code, json_out, _ = run("operations", "get", "op-1", "--format", "json")

    assert code == json_code == 0
    assert "leftovers   arn:aws:s3:::bucket" in out
    assert "execution   arn:aws:states:" in out
    assert json.loads(json_out)["status"] == "SUCCEEDED"


def test_list_prints_a_table(api: FakeApi) -> None:
    api.answer(
        "GET",
        "/clusters",
        (
            200,
            {
                "clusters": [
                    {"clusterName": "a", "status": "ACTIVE", "owner": "ann", "lastOperationId": "op-1"}
                ]
            },
        ),
    )

    code, out, _ = run("clusters", "list")

    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "OWNER", "PROJECT", "LAST", "OPERATION"]
    assert out.splitlines()[1].split() == ["a", "ACTIVE", "ann", "-", "op-1"]


def test_list_empty_and_json(api: FakeApi) -> None:
    api.answer("GET", "/clusters", (200, {"clusters": []}))

    assert run("clusters", "list")[1] == "no clusters\n"
    assert json.loads(run("clusters", "list", "--format", "json")[1]) == []


def test_get_shows_registry_live_status_and_nodes(api: FakeApi) -> None:
    api.answer(
        "GET",
        "/clusters/ml-cluster",
        (
            200,
            {
                "clusterName": "ml-cluster",
                "status": "ACTIVE",
                "owner": "ann",
                "sagemaker": {
                    "ClusterStatus": "InService",
                    "FailureMessage": "one node replaced",
                    "InstanceGroups": [
                        {
                            "InstanceGroupName": "workers",
                            "InstanceType": "ml.p5.48xlarge",
                            "CurrentCount": 3,
                            "TargetCount": 4,
                            "Status": "Updating",
                        }
                    ],
                },
            },
        ),
    )
    api.answer(
        "GET",
        "/clusters/ml-cluster/nodes",
        (
            200,
            {
                "nodes": [
                    {
                        "InstanceId": "i-1",
                        "InstanceGroupName": "workers",
                        "InstanceType": "ml.p5.48xlarge",
                        "InstanceStatus": {"Status": "Running"},
                    }
                ]
            },
        ),
    )

    code, out, _ = run("clusters", "get", "ml-cluster", "--nodes")
    _, json_out, _ = run("clusters", "get", "ml-cluster", "--nodes", "--format", "json")

    assert code == 0
    assert "sagemaker   InService" in out
    assert "failure     one node replaced" in out
    assert "workers  ml.p5.48xlarge  3/4    Updating" in out
    assert "i-1   workers  ml.p5.48xlarge  Running" in out
    assert json.loads(json_out)["nodes"][0]["InstanceId"] == "i-1"


def test_delete_passes_the_stack_and_can_print_json(api: FakeApi) -> None:
    api.answer(
        "DELETE",
        "/clusters/ml-cluster",
        (
            202,
            {
                "operationId": "op-2",
                "clusterName": "ml-cluster",
                "status": "RUNNING",
                "warnings": [{"path": "x", "message": "careful"}],
            },
        ),
    )

    code, out, err = run("clusters", "delete", "ml-cluster", "--stack-name", "vpc", "--format", "json")

    assert code == 0
    assert json.loads(out)["operationId"] == "op-2"
    assert "warning: x: careful" in err
    assert api.requests[0]["url"].endswith("?stackName=vpc")


def test_server_errors_exit_3(api: FakeApi) -> None:
    api.answer(
        "GET", "/clusters/x", (503, {"message": "the workflow could not be started", "operationId": "op-9"})
    )

    code, _, err = run("clusters", "get", "x")

    assert code == 3
    assert "operation: op-9" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("clusters", "create", "--cluster-config", "/nope.json", "--owner", "a", "--project", "p"),
            "cannot read",
        ),
        (
            ("clusters", "create", "--cluster-config", __file__, "--owner", "a", "--project", "p"),
            "is not JSON",
        ),
    ],
)
def test_usage_errors_exit_2(api: FakeApi, argv: tuple[str, ...], message: str) -> None:
    code, _, err = run(*argv)

    assert code == 2
    assert message in err


def test_alert_email_needs_a_budget(api: FakeApi, config_files: dict[str, str]) -> None:
    code, _, err = run(
        "clusters", "create", "--cluster-config", config_files["config"], "--owner", "a", "--project", "p",
        "--alert-email", "a@b.co",
    )  # fmt: skip

    assert code == 2
    assert "--alert-email needs --budget-usd" in err


def test_no_endpoint_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(client_cli.ENDPOINT_ENV, raising=False)

    code, _, err = run("clusters", "list")

    assert code == 2
    assert "no endpoint" in err


def test_no_credentials_exit_3(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_credentials(endpoint: str, *, region: str | None = None) -> AutopilotClient:
        raise ClientError("no AWS credentials found")

    monkeypatch.setattr(client_cli, "AutopilotClient", no_credentials)

    code, _, err = run("clusters", "list")

    assert code == 3
    assert "no AWS credentials found" in err
