"""The `autopilot` commands end to end through main(), against a fake API that answers only what
docs/openapi.json allows: what lands on stdout (and only there), exit codes, errors, --wait."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import autopilot_config
import pytest
from autopilot_cli import __version__, common, configure, operations
from autopilot_cli.client import AutopilotClient
from autopilot_cli.main import build_parser, main
from autopilot_cli.output import print_generic, text_lines
from autopilot_cli.progress import WaitProgress
from autopilot_cli.views import print_operation
from botocore.credentials import Credentials
from botocore.session import Session as BotocoreSession
from botocore.stub import Stubber

from tests.samples import create_body
from tests.unit.cli_fake_api import FakeApi
from tests.unit.validation.builders import SLURM_CONFIG, SLURM_PROVISIONING

ENDPOINT = "http://127.0.0.1:3000"
CREDENTIALS = Credentials("AKIDEXAMPLE", "secret", "session-token")
T0 = "2025-11-21T14:00:00Z"


@pytest.fixture(autouse=True)
def no_saved_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Never the user's own ~/.config/autopilot/config.json."""
    path = tmp_path / "config" / "autopilot.json"
    monkeypatch.setenv("AUTOPILOT_CONFIG", str(path))
    monkeypatch.delenv("AUTOPILOT_ENDPOINT", raising=False)
    return path


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()

    def client(
        endpoint: str, *, region: str | None, profile: str | None, debug: TextIO | None = None
    ) -> AutopilotClient:
        assert endpoint == ENDPOINT
        return AutopilotClient(
            endpoint,
            region=region or "us-east-1",
            credentials=CREDENTIALS,
            http=fake,  # type: ignore[arg-type]
            debug=debug,
        )

    monkeypatch.setattr(common, "make_client", client)
    monkeypatch.setenv("AUTOPILOT_ENDPOINT", ENDPOINT)
    return fake


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def at(minutes: float) -> str:
    moment = datetime(2025, 11, 21, 14, tzinfo=UTC) + timedelta(minutes=minutes)
    return moment.isoformat().replace("+00:00", "Z")


def operation(status: str = "RUNNING", *steps: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "operationId": "op-1",
        "kind": "CreateCluster",
        "clusterName": "ml-cluster",
        "status": status,
        "createdAt": T0,
        "updatedAt": steps[-1][1] if steps else T0,
        "steps": [{"name": n, "enteredAt": t} for n, t in steps],
        "executionArn": "arn:aws:states:us-east-1:123456789012:execution:create:op-1",
        **extra,
    }


def cluster_view(sagemaker_status: str = "Creating", workers: tuple[int, int] = (0, 2)) -> dict[str, Any]:
    return {
        "clusterName": "ml-cluster",
        "status": "CREATING",
        "owner": "ann",
        "sagemaker": {
            "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
            "ClusterStatus": sagemaker_status,
            "InstanceGroups": [
                {"InstanceGroupName": "controller", "CurrentCount": 1, "TargetCount": 1},
                {"InstanceGroupName": "workers", "CurrentCount": workers[0], "TargetCount": workers[1]},
            ],
        },
    }


def summary(name: str, status: str = "ACTIVE", **extra: Any) -> dict[str, Any]:
    return {
        "clusterName": name,
        "status": status,
        "lastOperationId": "op-1",
        "createdAt": T0,
        "updatedAt": T0,
        **extra,
    }


ACCEPTED = {"operationId": "op-1", "clusterName": "ml-cluster", "status": "RUNNING"}


@pytest.fixture
def config_files(tmp_path: Path) -> dict[str, str]:
    body = create_body()
    (tmp_path / "cluster-config.json").write_text(json.dumps(body["clusterConfig"]))
    (tmp_path / "provisioning.json").write_text(json.dumps(body["provisioningParameters"]))
    return {
        "config": str(tmp_path / "cluster-config.json"),
        "provisioning": str(tmp_path / "provisioning.json"),
    }


def create_argv(config_files: dict[str, str], *more: str) -> list[str]:
    config = config_files["config"]
    return ["clusters", "create", "--cluster-config", config, "--owner", "ann", "--project", "llm", *more]


# --- clusters create / delete ---------------------------------------------------------------------


def test_create_sends_the_request_body_and_prints_the_operation(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))

    code, out, _ = run(
        *create_argv(config_files, "--provisioning-parameters", config_files["provisioning"]),
        "--budget-usd", "100", "--alert-email", "ann@example.com",
    )  # fmt: skip

    assert code == 0
    sent = json.loads(api.requests[0]["body"])
    assert sent["owner"] == "ann"
    assert sent["budget"] == {"monthlyLimitUsd": 100.0, "alertEmails": ["ann@example.com"]}
    assert sent["clusterConfig"]["ClusterName"] == "ml-cluster"
    assert sent["provisioningParameters"]
    assert out.splitlines() == [
        "operation op-1 accepted for cluster ml-cluster",
        "follow it: autopilot operations get op-1 --wait",
    ]


def test_create_sends_each_login_target_group_and_names_the_flag_of_a_bad_one(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    ssh = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/autopilot-login-ssh/0a1b2c3d"
    web = ssh.replace("-ssh/", "-web/")
    refused = {
        "message": "a login target group cannot hold the login nodes",
        "errors": [{"path": "loginTargetGroupArns[1]", "message": f"{web} no such target group"}],
    }
    api.answer("POST", "/clusters", (400, refused))

    code, _, err = run(*create_argv(config_files, "--login-target-group", ssh, "--login-target-group", web))

    assert code == 1
    assert json.loads(api.requests[0]["body"])["loginTargetGroupArns"] == [ssh, web]
    assert f"  --login-target-group: loginTargetGroupArns[1]: {web} no such target group" in err.splitlines()


def test_a_dry_run_asks_the_api_to_check_and_prints_what_it_would_send(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    request = {"ClusterName": "ml-cluster", "Tags": [{"Key": "owner", "Value": "ann"}]}
    plan = {
        "clusterName": "ml-cluster",
        "createClusterRequest": request,
        "costTags": [{"Key": "owner", "Value": "ann"}],
        "budget": {"budgetName": "hyperpod-ml-cluster", "limitAmount": "100.00", "costFilter": "x",
                   "subscribers": []},
        "projectBudget": None,
        "checks": ["the config passes"],
        "warnings": [],
    }  # fmt: skip
    api.answer("POST", "/clusters", (200, plan))

    code, out, _ = run(*create_argv(config_files, "--dry-run", "--budget-usd", "100"))

    assert code == 0
    assert urlsplit(api.requests[0]["url"]).query == "dryRun=true"
    assert "Idempotency-Key" not in api.requests[0]["headers"]  # nothing to retry safely: nothing made
    lines = out.splitlines()
    assert lines[:4] == [
        "dry run: cluster ml-cluster would be created; nothing was",
        "  ok  the config passes",
        "budget: hyperpod-ml-cluster, 100.00 USD a month",
        "CreateCluster request:",
    ]
    assert json.loads("\n".join(lines[4:])) == request

    code, out, _ = run(*create_argv(config_files, "--dry-run", "--output", "json"))
    assert json.loads(out) == plan


def test_create_from_a_yaml_file_is_a_usage_error_naming_yaml(api: FakeApi, run: Any, tmp_path: Path) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text("---\nClusterName: ml-cluster\n")

    code, _, err = run(
        "clusters", "create", "--cluster-config", str(config), "--owner", "a", "--project", "b"
    )

    assert code == 2
    assert f"{config} is YAML, not JSON" in err
    assert api.requests == []


def test_each_invocation_sends_its_own_signed_idempotency_key(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))
    api.answer("DELETE", "/clusters/ml-cluster", (202, ACCEPTED))

    run(*create_argv(config_files))
    run(*create_argv(config_files))
    run(*create_argv(config_files), "--idempotency-key", "retry-of-yesterday")
    run("clusters", "delete", "ml-cluster")
    run("clusters", "delete", "ml-cluster", "--idempotency-key", "del-1")

    keys = [r["headers"]["Idempotency-Key"] for r in api.requests]
    assert keys[0] != keys[1]
    assert keys[3] not in keys[:2]
    assert str(uuid.UUID(keys[0])) == keys[0]
    assert keys[2] == "retry-of-yesterday"
    assert keys[4] == "del-1"
    assert all("idempotency-key" in r["headers"]["Authorization"] for r in api.requests)  # signed


REJECTION = {
    "message": "the cluster configuration is invalid",
    "errors": [
        {
            "file": "cluster-config.json",
            "path": "InstanceGroups[1].ThreadsPerCore",
            "message": "must be 1 or 2",
        },
        {"location": "body", "path": "owner", "message": "Field required"},
        {"location": "body", "path": "budget.monthlyLimitUsd", "message": "Input should be greater than 0"},
    ],
}


def test_a_rejection_names_each_problem_on_stderr(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (400, REJECTION))

    code, out, err = run(*create_argv(config_files))

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: the cluster configuration is invalid (HTTP 400)",
        "  cluster-config.json: InstanceGroups[1].ThreadsPerCore: must be 1 or 2",
        "  --owner: owner: Field required",
        "  --budget-usd: budget.monthlyLimitUsd: Input should be greater than 0",
    ]


def test_in_json_mode_a_rejection_is_a_json_error_on_stdout(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (400, REJECTION))

    code, out, err = run(*create_argv(config_files, "--output", "json"))

    assert (code, err) == (1, "")
    assert json.loads(out) == {
        "error": {
            "code": "ApiError",
            "message": "the cluster configuration is invalid (HTTP 400)",
            "status": 400,
            "errors": REJECTION["errors"],
        }
    }


def test_wait_in_json_mode_prints_only_the_final_operation_and_progress_on_stderr(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))
    api.answer(
        "GET",
        "/operations/op-1",
        (200, operation("RUNNING", ("Create Cluster", at(0)))),
        (200, operation("RUNNING", ("Create Cluster", at(0)), ("Wait For Cluster", at(0.1)))),
        (200, operation("SUCCEEDED", ("Create Cluster", at(0)), ("Wait For Cluster", at(0.1)),
                        ("Succeeded", at(21)))),
    )  # fmt: skip
    api.answer(
        "GET",
        "/clusters/ml-cluster",
        (200, cluster_view("Creating", (0, 2))),
        (200, cluster_view("Creating", (1, 2))),
        (200, cluster_view("InService", (2, 2))),
    )

    code, out, err = run(*create_argv(config_files, "--wait", "--poll", "0", "--format", "json"))

    assert code == 0
    assert json.loads(out)["status"] == "SUCCEEDED"  # stdout is one JSON document
    lines = err.splitlines()
    assert lines[:2] == ["operation op-1 accepted for cluster ml-cluster", "CreateCluster ml-cluster (op-1)"]
    assert " Create Cluster (" in lines[2]
    assert lines[2].endswith("| SageMaker Creating | controller 1/1 | workers 0/2")
    assert " Wait For Cluster (" in lines[3]
    assert lines[3].endswith("| SageMaker Creating | controller 1/1 | workers 1/2")
    assert lines[-1] == "SUCCEEDED after 21m00s"


def test_wait_in_table_mode_ends_with_the_operation_and_its_step_durations(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))
    done = operation(
        "SUCCEEDED",
        ("Create Cluster", at(0)),
        ("Wait For Cluster", at(1 / 12)),
        ("Succeeded", at(21 + 1 / 6)),
    )
    api.answer("GET", "/operations/op-1", (200, done))
    api.answer("GET", "/clusters/ml-cluster", (200, cluster_view("InService", (2, 2))))

    code, out, _ = run(*create_argv(config_files, "--wait", "--poll", "0"))

    assert code == 0
    assert f"{'status':<14}SUCCEEDED" in out.splitlines()
    assert "  Create Cluster           5s" in out.splitlines()
    assert "  Wait For Cluster         21m05s" in out.splitlines()


@pytest.mark.parametrize("output", ["table", "json", "text"])
def test_wait_ends_with_the_operations_warnings_on_stderr(api: FakeApi, run: Any, output: str) -> None:
    shortfall = "partial capacity: instance group workers has 0 of 2 instances; HyperPod launches the rest"
    done = operation("SUCCEEDED", ("Create Cluster", at(0)), ("Tag Cluster", at(21)), warnings=[shortfall])
    api.answer("GET", "/operations/op-1", (200, done))
    api.answer("GET", "/clusters/ml-cluster", (200, cluster_view("InService", (0, 2))))

    code, _, err = run("operations", "get", "op-1", "--wait", "--poll", "0", "--output", output)

    assert code == 0
    lines = err.splitlines()
    assert lines[-2:] == ["SUCCEEDED after 21m00s", f"warning: {shortfall}"]


def test_waiting_on_a_failed_operation_exits_1_with_the_cause(api: FakeApi, run: Any) -> None:
    failed = operation(
        "FAILED", ("Delete Cluster", at(0)), ("Failed", at(60)),
        error={"error": "Autopilot.Timeout", "cause": "cluster x was still Deleting after 120 polls"},
    )  # fmt: skip
    api.answer("GET", "/operations/op-1", (200, failed))
    api.answer("GET", "/clusters/ml-cluster", (404, {"message": "no cluster ml-cluster"}))

    code, out, err = run("operations", "get", "op-1", "--wait", "--poll", "0")

    assert code == 1
    assert "error: Autopilot.Timeout: cluster x was still Deleting after 120 polls" in err
    assert "SageMaker unknown" in err  # the cluster could not be read: the wait goes on
    assert "  Delete Cluster           1h00m00s" in out


def test_waiting_on_a_failed_create_shows_its_diagnosis_fix_and_evidence(api: FakeApi, run: Any) -> None:
    line = "fatal error: An error occurred (403) when calling the HeadObject operation: Forbidden"
    stream = "LifecycleConfig/worker-group/i-0b66516c4a8bfcea4"
    diagnosis = {
        "category": "s3-access-denied",
        "summary": "The instance reached S3 but was refused the lifecycle scripts' bucket.",
        "fix": "Give the ExecutionRole s3:GetObject on SourceS3Uri.",
        "evidence": [{"stream": stream, "line": line}],
        "confidence": "high",
    }
    failed = operation(
        "FAILED", ("Create Cluster", at(0)), ("Failed", at(20)),
        error={"error": "Autopilot.ClusterFailed", "cause": "cluster ml-cluster is Failed"},
        diagnosis=diagnosis,
    )  # fmt: skip
    api.answer("GET", "/operations/op-1", (200, failed))
    api.answer("GET", "/clusters/ml-cluster", (404, {"message": "no cluster ml-cluster"}))

    code, out, _ = run("operations", "get", "op-1", "--wait", "--poll", "0")

    assert code == 1
    assert f"{'diagnosis':<14}s3-access-denied: The instance reached S3" in out
    assert f"{'fix':<14}Give the ExecutionRole s3:GetObject on SourceS3Uri." in out
    assert f"{'evidence':<14}{stream}: {line}" in out


@pytest.mark.parametrize("output", ["table", "json"])
def test_a_wait_deadline_exits_3_and_says_how_to_follow_it(api: FakeApi, run: Any, output: str) -> None:
    api.answer("GET", "/operations/op-1", (200, operation()))
    api.answer("GET", "/clusters/ml-cluster", (200, cluster_view()))

    code, out, err = run("operations", "get", "op-1", "--wait", "--timeout", "0", "--output", output)

    assert code == 3
    hint = "follow it with: autopilot operations get op-1 --wait"
    if output == "json":
        error = json.loads(out)["error"]
        assert (error["code"], error["operationId"], error["status"]) == ("WaitTimeout", "op-1", "RUNNING")
        assert hint in error["message"]
    else:
        assert "error: operation op-1 is still RUNNING after --timeout 0 s; " + hint in err


def test_delete_passes_the_stack_and_warnings_go_to_stderr(api: FakeApi, run: Any) -> None:
    warned = {**ACCEPTED, "warnings": [{"path": "x", "message": "careful"}]}
    api.answer("DELETE", "/clusters/ml-cluster", (202, warned))

    code, out, err = run("clusters", "delete", "ml-cluster", "--stack-name", "vpc", "--format", "json")

    assert code == 0
    assert json.loads(out)["operationId"] == "op-1"
    assert "warning: x: careful" in err
    assert api.requests[0]["url"].endswith("?stackName=vpc")


# --- clusters list / get --------------------------------------------------------------------------


def three_clusters(api: FakeApi) -> FakeApi:
    """Two pages: a (ann, llm), b (bob, llm, CREATING); c (ann, vision)."""
    api.routes.pop(("GET", "/clusters"), None)
    api.answer(
        "GET",
        "/clusters",
        (
            200,
            {
                "clusters": [
                    summary(
                        "a",
                        owner="ann",
                        project="llm",
                        sagemakerStatus="InService",
                        createdBy="arn:aws:sts::123456789012:assumed-role/Researchers/ann",
                    ),
                    summary("b", "CREATING", owner="bob", project="llm"),
                ],
                "nextToken": "t1",
            },
        ),
        (200, {"clusters": [summary("c", owner="ann", project="vision")]}),
    )
    return api


def test_list_prints_a_table(api: FakeApi, run: Any) -> None:
    three_clusters(api)
    code, out, _ = run("clusters", "list")

    assert code == 0
    assert [line.split() for line in out.splitlines()[:2]] == [
        ["NAME", "STATUS", "SAGEMAKER", "OWNER", "PROJECT", "CREATED", "BY", "LAST", "OPERATION"],
        ["a", "ACTIVE", "InService", "ann", "llm", "assumed-role/Researchers/ann", "op-1"],
    ]


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        (["--owner", "ann"], ["a", "c"]),
        (["--project", "llm"], ["a", "b"]),
        (["--status", "creating"], ["b"]),
        (["--owner", "ann", "--project", "llm"], ["a"]),
        (["--owner", "nobody"], []),
    ],
)
def test_list_filters_over_every_page(api: FakeApi, run: Any, filters: list[str], names: list[str]) -> None:
    three_clusters(api)
    code, out, _ = run("clusters", "list", *filters, "--output", "json")

    assert code == 0
    assert [c["clusterName"] for c in json.loads(out)] == names


def test_query_selects_and_text_output_is_tab_separated(api: FakeApi, run: Any) -> None:
    def listed(*argv: str) -> str:
        three_clusters(api)
        code, out, _ = run("clusters", "list", *argv)
        assert code == 0
        return str(out)

    assert listed("--query", "[].clusterName", "--output", "text") == "a\tb\tc\n"
    assert listed("--query", "[?owner=='ann'].[clusterName, project]", "--output", "text") == (
        "a\tllm\nc\tvision\n"
    )
    assert listed("--query", "[].{name: clusterName, owner: owner}").splitlines() == [
        "NAME  OWNER",
        "a     ann",
        "b     bob",
        "c     ann",
    ]


def test_a_bad_query_is_a_usage_error(api: FakeApi, run: Any) -> None:
    code, out, _ = run("clusters", "list", "--query", "[?", "--output", "json")

    assert code == 2
    assert json.loads(out)["error"]["code"] == "UsageError"
    assert api.requests == []


def test_list_empty(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters", (200, {"clusters": []}))

    assert run("clusters", "list")[1] == "no clusters\n"
    assert json.loads(run("clusters", "list", "--format", "json")[1]) == []


def test_get_shows_registry_live_status_and_nodes(api: FakeApi, run: Any) -> None:
    view = cluster_view("InService", (3, 4))
    view["sagemaker"]["FailureMessage"] = "one node replaced"
    view["sagemaker"]["InstanceGroups"][1] |= {"InstanceType": "ml.p5.48xlarge", "Status": "Updating"}
    api.answer("GET", "/clusters/ml-cluster", (200, view))
    node = {
        "InstanceId": "i-1",
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Healthy"},
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("clusters", "get", "ml-cluster", "--nodes")
    _, json_out, _ = run("clusters", "get", "ml-cluster", "--nodes", "--format", "json")

    assert code == 0
    assert "sagemaker  InService" in out
    assert "failure    one node replaced" in out
    assert "workers     ml.p5.48xlarge  3/4    Updating" in out
    assert "i-1   workers  ml.p5.48xlarge  Running  -      Healthy  -" in out
    assert json.loads(json_out)["nodes"][0]["InstanceId"] == "i-1"


def test_get_shows_the_slurm_agent_and_each_nodes_slurm_state(api: FakeApi, run: Any) -> None:
    view = cluster_view("InService", (3, 4))
    view["agent"] = {"status": "connected", "lastSeen": "2026-11-27T21:00:00.000Z", "version": "1.0.0"}
    api.answer("GET", "/clusters/ml-cluster", (200, view))
    node = {
        "InstanceId": "i-1",
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Healthy"},
        "slurm": {
            "state": "MIXED+DRAIN",
            "reason": "autopilot op-7: replace",
            "jobs": ["12", "13"],
            "gpus": 8,
        },
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("clusters", "get", "ml-cluster", "--nodes")

    assert code == 0
    assert "agent      connected 1.0.0 (last report 2026-11-27T21:00:00.000Z)" in out
    assert "SLURM" in out.splitlines()[-2]
    assert out.splitlines()[-1].split()[4:10] == [
        "MIXED+DRAIN",
        "(autopilot",
        "op-7:",
        "replace)",
        "2",
        "jobs",
    ]


def test_operation_get_prints_the_record_and_json(api: FakeApi, run: Any) -> None:
    done = operation(
        "SUCCEEDED", ("Delete Cluster", at(0)), ("Succeeded", at(3)), leftovers=["arn:aws:s3:::bucket"],
        warnings=["cost tags could not be written"],
    )  # fmt: skip
    api.answer("GET", "/operations/op-1", (200, done))

    code, out, _ = run("operations", "get", "op-1")
    json_code, json_out, _ = run("operations", "get", "op-1", "--format", "json")

    assert code == json_code == 0
    assert f"{'leftovers':<14}arn:aws:s3:::bucket" in out
    assert f"{'execution':<14}arn:aws:states:" in out
    assert f"{'warning':<14}cost tags could not be written" in out
    assert json.loads(json_out) == done


# --- failures and usage ---------------------------------------------------------------------------


def test_server_errors_exit_3(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/x", (503, {"message": "AWS is throttling", "operationId": "op-9"}))

    code, _, err = run("clusters", "get", "x")

    assert code == 3
    assert "  operation: op-9" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cluster-config", "/nope.json"], "cannot read"),
        (["--cluster-config", __file__], "is not JSON"),
        (["--cluster-config", str(SLURM_CONFIG), "--budget-usd", "lots"], "invalid float value: 'lots'"),
    ],
)
def test_usage_errors_exit_2(api: FakeApi, run: Any, argv: list[str], message: str) -> None:
    code, _, err = run("clusters", "create", *argv, "--owner", "a", "--project", "p")

    assert code == 2
    assert message in err
    assert api.requests == []


def test_argparse_errors_are_json_in_json_mode(run: Any) -> None:
    code, out, _ = run("clusters", "create", "--output", "json")

    assert code == 2
    assert "the following arguments are required: --cluster-config" in json.loads(out)["error"]["message"]


@pytest.mark.parametrize("output", ["table", "json"])
def test_ctrl_c_during_wait_exits_130_naming_the_follow_up_and_the_idempotency_key(
    api: FakeApi, run: Any, config_files: dict[str, str], monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))

    def interrupted(*_: Any, **__: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(AutopilotClient, "wait_for_operation", interrupted)

    code, out, err = run(*create_argv(config_files, "--wait", "--output", output))

    assert code == 130
    [sent] = [r["headers"]["Idempotency-Key"] for r in api.requests if r["method"] == "POST"]
    assert "Traceback" not in err
    assert "stopped waiting; operation op-1 goes on without you" in err
    assert "follow it with: autopilot operations get op-1 --wait" in err
    assert f"Idempotency-Key: {sent} (repeat the command with --idempotency-key {sent}" in err
    if output == "json":
        error = json.loads(out)["error"]
        assert (error["code"], error["operationId"], error["idempotencyKey"]) == ("Interrupted", "op-1", sent)
    else:
        assert out == ""


def test_ctrl_c_before_the_answer_names_the_key_that_makes_a_repeat_safe(
    api: FakeApi, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: Any, **__: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(AutopilotClient, "delete_cluster", interrupted)

    code, _, err = run("clusters", "delete", "ml-cluster", "--idempotency-key", "del-7", "--wait")

    assert code == 130
    assert "interrupted; the request may have reached the API" in err
    assert "repeat the command with --idempotency-key del-7" in err


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["clusters", "list", "--endpoint", "127.0.0.1:3000"], "give its scheme, e.g. http://127.0.0.1:3000"),
        (
            ["clusters", "list", "--endpoint", "abc.execute-api.us-east-1.amazonaws.com/Prod"],
            "e.g. https://abc.",
        ),
        (["clusters", "list", "--endpoint", "ftp://example.com"], "http:// or https://, not ftp://"),
        (["configure", "--endpoint", "127.0.0.1:3000"], "give its scheme, e.g. http://127.0.0.1:3000"),
    ],
)
def test_an_endpoint_without_a_scheme_is_a_usage_error_naming_the_fix(
    run: Any, no_saved_config: Path, argv: list[str], reason: str
) -> None:
    code, _, err = run(*argv)

    assert code == 2
    assert reason in err
    assert "Traceback" not in err
    assert not no_saved_config.exists()  # configure saved nothing


def test_an_endpoint_from_the_environment_is_checked_too(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPILOT_ENDPOINT", "127.0.0.1:3000")

    code, _, err = run("clusters", "list")

    assert code == 2
    assert (
        "$AUTOPILOT_ENDPOINT: '127.0.0.1:3000' is not a URL: give its scheme, e.g. http://127.0.0.1:3000"
        in err
    )


def test_no_endpoint_is_a_usage_error(run: Any) -> None:
    code, _, err = run("clusters", "list")

    assert code == 2
    assert "no endpoint: pass --endpoint, set $AUTOPILOT_ENDPOINT or run `autopilot configure" in err


def test_no_credentials_exit_3(run: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    code, out, _ = run(
        "clusters",
        "list",
        "--endpoint",
        "https://a1.execute-api.eu-west-1.amazonaws.com/Prod",
        "--output",
        "json",
    )

    assert code == 3
    assert json.loads(out)["error"] == {
        "code": "ClientError",
        "message": "no AWS credentials found (environment, profile, SSO or instance role)",
    }


def test_version(run: Any) -> None:
    assert run("--version")[:2] == (0, f"autopilot {__version__}\n")


def leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += leaf_parsers(child)
    return found or [parser]


def test_global_options_may_come_before_the_command(api: FakeApi, run: Any) -> None:
    three_clusters(api)

    code, out, _ = run("--output", "json", "--query=[].clusterName", "clusters", "list", "--owner", "ann")

    assert code == 0
    assert json.loads(out) == ["a", "c"]


def test_a_mistyped_option_shows_the_subcommands_usage(run: Any) -> None:
    code, _, err = run("clusters", "list", "--ownr", "ann")

    assert code == 2
    assert err.startswith("usage: autopilot clusters list ")
    assert "autopilot clusters list: error: unrecognized arguments: --ownr ann" in err


@pytest.mark.parametrize("command", [["clusters", "list"], ["validate", "--cluster-config", "x.json"]])
def test_an_unknown_region_is_a_usage_error(run: Any, command: list[str]) -> None:
    code, _, err = run(*command, "--region", "us-est-1")

    assert code == 2
    assert "unknown region 'us-est-1'" in err


def test_an_unknown_operation_kind_is_a_usage_error(run: Any) -> None:
    code, _, err = run("operations", "list", "ml-cluster", "--kind", "Replacenode")

    assert code == 2
    assert "invalid choice: 'Replacenode'" in err


def test_debug_shows_each_request_and_answer_without_credentials(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters", (200, {"clusters": []}))

    code, _, err = run("clusters", "list", "--debug")

    assert code == 0
    assert f"debug: > GET {ENDPOINT}/clusters" in err
    assert "debug: < 200 in " in err
    assert CREDENTIALS.secret_key not in err
    assert "Signature=" not in err


def test_healing_pause_sends_its_reason(api: FakeApi, run: Any) -> None:
    state = {
        "clusterName": "ml-cluster", "paused": True, "pausedReason": "driver update",
        "breaker": {"unhealthyInWindow": 0, "nodeCount": 4, "maxUnhealthyPercent": 50, "windowMinutes": 30},
        "activeRepairs": 0, "maxConcurrentRepairs": 2,
    }  # fmt: skip
    api.answer("PUT", "/clusters/ml-cluster/healing", (200, state))

    code, _, _ = run("healing", "pause", "ml-cluster", "--reason", "driver update")

    assert code == 0
    assert json.loads(api.requests[0]["body"]) == {"paused": True, "reason": "driver update"}


def test_every_option_shows_its_default_in_help() -> None:
    leaves = leaf_parsers(build_parser())
    assert len(leaves) == 21
    for parser in leaves:
        help_text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.default is not argparse.SUPPRESS:
                shown = parser._get_formatter()._expand_help(action) if action.help else ""
                assert "default" in shown or "required" in shown, f"{parser.prog} {action.option_strings}"
        if parser.prog != "autopilot completion":  # a shell script, in no output form
            assert "(default: table)" in help_text, parser.prog


# --- configure ------------------------------------------------------------------------------------

API_URL = "https://abc123.execute-api.eu-west-1.amazonaws.com/Prod"


@pytest.fixture
def stacks(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    client = BotocoreSession().create_client("cloudformation", region_name="eu-west-1")
    stubber = Stubber(client)
    monkeypatch.setattr(configure, "cloudformation", lambda session, region: client)
    return stubber


def stack(outputs: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "Stacks": [
            {
                "StackName": "autopilot",
                "CreationTime": datetime(2025, 11, 1, tzinfo=UTC),
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": outputs,
            }
        ]
    }


def test_configure_reads_the_api_url_from_the_stack_and_commands_use_it(
    stacks: Stubber, run: Any, no_saved_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stacks.add_response(
        "describe_stacks",
        stack(
            [{"OutputKey": "TableName", "OutputValue": "t"}, {"OutputKey": "ApiUrl", "OutputValue": API_URL}]
        ),
        {"StackName": "autopilot"},
    )
    with stacks:
        code, out, _ = run("configure", "--stack", "autopilot", "--region", "eu-west-1", "--output", "json")

    assert code == 0
    assert json.loads(out) == {
        "configFile": str(no_saved_config),
        "endpoint": API_URL,
        "region": "eu-west-1",
        "stack": "autopilot",
    }
    assert json.loads(no_saved_config.read_text())["endpoint"] == API_URL
    used = FakeApi()
    monkeypatch.setattr(
        common,
        "make_client",
        lambda endpoint, *, region, profile, debug=None: AutopilotClient(
            endpoint,
            region=region,
            credentials=CREDENTIALS,
            http=used,  # type: ignore[arg-type]
        ),
    )
    main(["clusters", "list"])
    assert used.requests[0]["url"] == f"{API_URL}/clusters"
    assert "/eu-west-1/execute-api/" in used.requests[0]["headers"]["Authorization"]


@pytest.mark.parametrize(
    ("outputs", "error"),
    [
        ([], "stack autopilot has no ApiUrl output: is it an Autopilot stack?"),
        (None, "cannot read stack autopilot: Stack with id autopilot does not exist"),
    ],
)
def test_configure_refuses_a_stack_without_the_api(
    stacks: Stubber, run: Any, no_saved_config: Path, outputs: list[dict[str, str]] | None, error: str
) -> None:
    if outputs is None:
        stacks.add_client_error(
            "describe_stacks", "ValidationError", "Stack with id autopilot does not exist", 400
        )
    else:
        stacks.add_response("describe_stacks", stack(outputs), {"StackName": "autopilot"})
    with stacks:
        code, _, err = run("configure", "--stack", "autopilot", "--region", "eu-west-1")

    assert code == 1
    assert error in err
    assert not no_saved_config.exists()


def test_configure_an_endpoint_directly(run: Any, no_saved_config: Path) -> None:
    code, out, _ = run("configure", "--endpoint", API_URL)

    assert code == 0
    assert "region      eu-west-1" in out
    assert json.loads(no_saved_config.read_text()) == {"endpoint": API_URL, "region": "eu-west-1"}


# --- validate --remote ----------------------------------------------------------------------------


def test_validate_remote_asks_the_api_and_prints_as_locally(api: FakeApi, run: Any) -> None:
    result = {
        "valid": False,
        "errors": [
            {"file": "provisioning-parameters.json", "path": "controller_group", "message": "not a group"}
        ],
        "warnings": [],
    }
    api.answer("POST", "/validate", (200, result))

    code, out, _ = run(
        "validate", "--remote", "--cluster-config", str(SLURM_CONFIG),
        "--provisioning-parameters", str(SLURM_PROVISIONING),
    )  # fmt: skip

    assert code == 1
    assert out == f"{SLURM_PROVISIONING.name}: controller_group: not a group\n"
    sent = json.loads(api.requests[0]["body"])
    assert sent["clusterConfig"] == json.loads(SLURM_CONFIG.read_text())
    assert sent["provisioningParameters"] == json.loads(SLURM_PROVISIONING.read_text())


# --- progress and output forms --------------------------------------------------------------------


def test_wait_progress_prints_changes_and_a_line_a_minute_otherwise() -> None:
    lines: list[str] = []
    clock = [datetime(2025, 11, 21, 14, 0, 30, tzinfo=UTC)]
    progress = WaitProgress(lines.append, now=lambda: clock[0])
    running = operation("RUNNING", ("Create Cluster", at(0)), ("Wait For Cluster", at(0.5)))

    for seconds in (0, 5, 50, 65, 70):
        clock[0] = datetime(2025, 11, 21, 14, 0, 30, tzinfo=UTC) + timedelta(seconds=seconds)
        progress.update(running, cluster_view("Creating", (1 if seconds >= 70 else 0, 2)))

    assert lines == [
        "CreateCluster ml-cluster (op-1)",
        "  [     30s] Wait For Cluster (0s) | SageMaker Creating | controller 1/1 | workers 0/2",
        "  [   1m35s] Wait For Cluster (1m05s) | SageMaker Creating | controller 1/1 | workers 0/2",
        "  [   1m40s] Wait For Cluster (1m10s) | SageMaker Creating | controller 1/1 | workers 1/2",
    ]


def test_wait_progress_times_on_the_apis_clock_and_beats_on_the_readers() -> None:
    # a sandbox's API clock runs 600 times faster than the reader's: the line shows the API's time,
    # and nothing changing is still one line a minute of the reader's, not one per poll
    lines: list[str] = []
    api_clock = [datetime(2025, 11, 21, 14, 0, 30, tzinfo=UTC)]
    wall = [0.0]
    progress = WaitProgress(lines.append, now=lambda: api_clock[0], monotonic=lambda: wall[0])
    running = operation("RUNNING", ("Create Cluster", at(0)), ("Wait For Cluster", at(0.5)))

    for _ in range(10):  # 5 s polls: 50 s of the reader's, 500 minutes of the API's
        progress.update(running, cluster_view("Creating", (0, 2)))
        wall[0] += 5
        api_clock[0] += timedelta(minutes=50)

    assert len(lines) == 2  # the header and the first state
    assert "[     30s] Wait For Cluster (0s)" in lines[1]


def test_wait_progress_of_a_node_repair_shows_the_node_and_its_last_action() -> None:
    lines: list[str] = []
    clock = [datetime(2025, 11, 21, 14, 0, 30, tzinfo=UTC)]
    progress = WaitProgress(lines.append, now=lambda: clock[0])
    repair = operation("RUNNING", kind="ReplaceNode", nodeId="i-0a1", actor="autopilot")
    replaced = {
        **repair,
        "successorNodeId": "i-0b2",
        "actions": [
            {"action": "reboot", "at": at(0), "result": "failed", "errorCode": "Autopilot.Timeout"},
            {"action": "replace", "at": at(0.2), "result": "succeeded", "successorNodeId": "i-0b2"},
        ],
    }

    progress.update(repair, cluster_view("InService", (1, 2)))
    clock[0] += timedelta(seconds=5)
    progress.update(replaced, cluster_view("InService", (1, 2)))

    assert lines[1].endswith("| node i-0a1 (autopilot)")
    assert lines[2].endswith("| node i-0a1 -> i-0b2 (autopilot): replace succeeded")


def test_text_and_generic_table_forms() -> None:
    document = {"name": "a", "count": 2, "ok": True, "groups": [{"g": "x", "n": 1}], "none": None}

    assert text_lines(document) == ["2\ta\t-\ttrue", "x\t1"]
    assert text_lines([]) == []

    class Out(list[str]):
        def write(self, text: str) -> None:
            self.append(text)

    out = Out()
    print_generic(document, out)  # type: ignore[arg-type]
    assert "".join(out).splitlines() == [
        "name    a",
        "count   2",
        "ok      true",
        'groups  [{"g": "x", "n": 1}]',
    ]


def test_the_cli_loads_neither_powertools_nor_boto3_nor_the_layers_package() -> None:
    """What `pip install ./layers/autopilot/autopilot_config ./cli` brings must be enough: the layer's
    Lambda code (the `autopilot` package, Powertools, boto3) stays out; the shared rules come in."""
    code = (
        "import sys; from autopilot_cli.main import main; "
        f"main(['validate', '--cluster-config', {str(SLURM_CONFIG)!r}, '--output', 'json']); "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'autopilot', 'autopilot_config', 'aws_lambda_powertools', 'boto3'})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    )

    *report, loaded = result.stdout.splitlines()
    assert json.loads("\n".join(report))["valid"] is True
    assert json.loads(loaded) == ["autopilot_config"]
    # ...and the CLI's distribution names the shared one as a dependency, carrying none of its code
    cli = tomllib.loads((Path(__file__).parents[2] / "cli" / "pyproject.toml").read_text())
    assert cli["tool"]["setuptools"]["packages"] == ["autopilot_cli"]
    assert f"hyperpod-autopilot-config=={autopilot_config.__version__}" in cli["project"]["dependencies"]


# --- nodes, operations, healing, cost -------------------------------------------------------------

NODE = "i-0123456789abcdef0"


def test_nodes_list_shows_health_and_the_repair_in_flight(api: FakeApi, run: Any) -> None:
    node = {
        "InstanceId": NODE,
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Unhealthy", "reason": "NvidiaErrorReboot", "since": at(1)},
        "repair": {"operationId": "op-7", "action": "reboot", "status": "RUNNING"},
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("nodes", "list", "ml-cluster")

    assert code == 0
    assert out.splitlines()[1].split() == [
        NODE, "workers", "ml.p5.48xlarge", "Running", "-", "Unhealthy", "NvidiaErrorReboot",
        "reboot", "RUNNING", "op-7",
    ]  # fmt: skip


@pytest.mark.parametrize("action", ["reboot", "replace"])
def test_a_node_repair_is_an_operation_to_follow(api: FakeApi, run: Any, action: str) -> None:
    api.answer("POST", f"/clusters/ml-cluster/nodes/{NODE}/{action}", (202, ACCEPTED))
    repaired = operation(
        "SUCCEEDED",
        ("Reboot Node", at(0)),
        ("Succeeded", at(2)),
        kind="ReplaceNode",
        nodeId=NODE,
        trigger="api",
    )
    api.answer("GET", "/operations/op-1", (200, repaired))
    api.answer("GET", "/clusters/ml-cluster", (200, cluster_view("InService", (2, 2))))

    code, out, err = run(
        "nodes", action, "ml-cluster", NODE, "--idempotency-key", "k-1", "--wait", "--poll", "0"
    )

    assert code == 0
    assert api.requests[0]["headers"]["Idempotency-Key"] == "k-1"
    assert f"{'node':<14}{NODE}" in out.splitlines()
    assert "ReplaceNode ml-cluster (op-1)" in err


def test_operations_list_passes_the_kind(api: FakeApi, run: Any) -> None:
    listed = operation("SUCCEEDED", ("Reboot Node", at(0)), kind="ReplaceNode")
    api.answer("GET", "/clusters/ml-cluster/operations", (200, {"operations": [listed]}))

    code, out, _ = run("operations", "list", "ml-cluster", "--kind", "ReplaceNode")

    assert code == 0
    assert api.requests[0]["url"].endswith("/clusters/ml-cluster/operations?kind=ReplaceNode")
    assert out.splitlines()[1].split()[:3] == ["op-1", "ReplaceNode", "SUCCEEDED"]


HEALING = {
    "clusterName": "ml-cluster",
    "paused": True,
    "pausedReason": "paused by hand",
    "pausedBy": "arn:aws:iam::123456789012:user/ann",
    "breaker": {"unhealthyInWindow": 0, "nodeCount": 3, "maxUnhealthyPercent": 20, "windowMinutes": 10},
    "activeRepairs": 0,
    "maxConcurrentRepairs": 4,
}


@pytest.mark.parametrize(("action", "paused"), [("pause", True), ("resume", False)])
def test_healing_pause_and_resume_put_the_switch(api: FakeApi, run: Any, action: str, paused: bool) -> None:
    api.answer("PUT", "/clusters/ml-cluster/healing", (200, {**HEALING, "paused": paused}))

    code, out, _ = run("healing", action, "ml-cluster", "--query", "paused", "--output", "json")

    assert (code, json.loads(out)) == (0, paused)
    assert json.loads(api.requests[0]["body"]) == {"paused": paused}


def test_healing_get_shows_the_breaker(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters/ml-cluster/healing", (200, HEALING))

    code, out, _ = run("healing", "get", "ml-cluster")

    assert code == 0
    assert f"{'paused':<24} true" in out.splitlines()
    assert f"  {'maxUnhealthyPercent':<22} 20" in out.splitlines()


def test_cost_shows_the_estimate(api: FakeApi, run: Any) -> None:
    cost = {
        "hourlyRateUsd": 98.32,
        "monthToDateUsd": 1200.5,
        "forecastUsd": 7000.0,
        "budgetUsd": 5000.0,
        "asOf": at(0),
    }
    api.answer("GET", "/clusters/ml-cluster/cost", (200, cost))

    code, out, err = run("cost", "ml-cluster", "--output", "text", "--query", "[hourlyRateUsd, forecastUsd]")

    assert (code, out) == (0, "98.32\t7000.0\n")
    assert (
        err == "warning: the month's forecast, 7,000.00 USD, is 1.4x the cluster's budget of 5,000.00 USD\n"
    )


def test_nodes_are_listed_by_group_and_age(api: FakeApi, run: Any) -> None:
    def node(instance_id: str, group: str, launched: str) -> dict[str, Any]:
        return {
            "InstanceId": instance_id, "InstanceGroupName": group, "InstanceType": "ml.p5.48xlarge",
            "InstanceStatus": {"Status": "Running"}, "LaunchTime": launched, "health": {"status": "Healthy"},
        }  # fmt: skip

    nodes = [
        node("i-0a", "workers", at(5)),
        node("i-09", "controller", at(0)),
        node("i-01", "workers", at(1)),
    ]
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": nodes}))

    code, out, _ = run("nodes", "list", "ml-cluster")

    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["i-09", "i-01", "i-0a"]


def test_lift_growth_block(api: FakeApi, run: Any) -> None:
    lifted = {"clusterName": "ml-cluster", "growthBlocked": False, "wasBlocked": True}
    api.answer("DELETE", "/clusters/ml-cluster/growth-block", (200, lifted))

    code, out, _ = run(
        "clusters", "lift-growth-block", "ml-cluster", "--query", "wasBlocked", "--output", "text"
    )

    assert (code, out) == (0, "true\n")


def test_scale_puts_the_group_count(api: FakeApi, run: Any) -> None:
    scaled = {
        "clusterName": "ml-cluster",
        "instanceGroup": "worker-group-1",
        "previousCount": 4,
        "instanceCount": 6,
        "operationId": "op-1",
        "targetCounts": {"controller-machine": 1, "worker-group-1": 6},
    }
    api.answer("PUT", "/clusters/ml-cluster/instance-groups/worker-group-1", (200, scaled))

    code, out, _ = run(
        "clusters",
        "scale",
        "ml-cluster",
        "--group",
        "worker-group-1",
        "--count",
        "6",
        "--query",
        "instanceCount",
        "--output",
        "text",
    )

    assert (code, out) == (0, "6\n")
    assert json.loads(api.requests[0]["body"]) == {"instanceCount": 6}


def test_a_broken_config_file_is_a_usage_error(run: Any, no_saved_config: Path) -> None:
    no_saved_config.parent.mkdir(parents=True)
    no_saved_config.write_text("{endpoint")

    code, out, _ = run("clusters", "list", "--output", "json")

    assert code == 2
    assert json.loads(out)["error"]["message"].startswith(f"cannot read {no_saved_config}")


def test_python_dash_m_runs_the_cli() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "autopilot_cli", "--version"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout) == (0, f"autopilot {__version__}\n")


def test_the_bash_completion_completes_commands_actions_and_options(run: Any, tmp_path: Path) -> None:
    code, script, _ = run("completion", "bash")
    assert code == 0
    (tmp_path / "completion.bash").write_text(script)

    def complete(*words: str) -> list[str]:
        typed = " ".join(f"'{w}'" for w in words)
        shell = (
            f"source {tmp_path / 'completion.bash'}; COMP_WORDS=(autopilot {typed}); "
            f"COMP_CWORD={len(words)}; _autopilot; echo ${{COMPREPLY[@]}}"
        )
        done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True)
        return done.stdout.split()

    assert complete("clu") == ["clusters"]
    assert complete("clusters", "cr") == ["create"]
    assert complete("clusters", "create", "--dry") == ["--dry-run"]
    assert complete("healing", "pause", "ml-cluster", "--rea") == ["--reason"]


def test_operations_watch_prints_each_new_operation_and_change_until_ctrl_c(
    api: FakeApi, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    create = operation("SUCCEEDED", operationId="op-1")
    repair = operation("RUNNING", operationId="op-2", kind="ReplaceNode", nodeId="i-0a1")
    failed = {**repair, "status": "FAILED", "error": {"error": "Autopilot.Timeout", "cause": "slow"}}
    api.answer(
        "GET",
        "/clusters/ml-cluster/operations",
        (200, {"operations": [create]}),
        (200, {"operations": [repair, create]}),
        (200, {"operations": [repair, create]}),
        (200, {"operations": [failed, create]}),
    )
    polls = iter(range(3))

    def sleep(_: float) -> None:
        if next(polls, None) is None:
            raise KeyboardInterrupt

    monkeypatch.setattr(operations, "_sleep", sleep)

    code, out, _ = run("operations", "list", "ml-cluster", "--watch", "--poll", "0")

    assert code == 0
    assert [line.split("  ")[1:] for line in out.splitlines()] == [
        ["op-1", "CreateCluster", "SUCCEEDED"],
        ["op-2", "ReplaceNode", "RUNNING", "i-0a1"],
        ["op-2", "ReplaceNode", "FAILED", "Autopilot.Timeout: slow"],
    ]


def test_an_operation_without_a_diagnosis_prints_no_diagnosis_line() -> None:
    out = io.StringIO()
    print_operation(operation("SUCCEEDED", diagnosis={}), out)
    assert "diagnosis" not in out.getvalue()
