"""`autopilot operations` (get, list, --watch) and a command's --wait end to end through main(), against a
fake API that answers only what docs/openapi.json allows: the progress on stderr, the final operation
(and only it) on stdout, the exit codes of a failure, a deadline and Ctrl-C."""

# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from autopilot_cli import operations
from autopilot_cli.client import AutopilotClient
from autopilot_cli.progress import WaitProgress
from autopilot_cli.views import print_operation

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import (  # noqa: F401  (fixtures)
    ACCEPTED,
    api,
    at,
    cluster_view,
    config_files,
    create_argv,
    no_saved_config,
    operation,
    run,
)

# --- --wait ---------------------------------------------------------------------------------------


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


# --- operations get / list ------------------------------------------------------------------------


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


def test_operations_list_passes_the_kind(api: FakeApi, run: Any) -> None:
    listed = operation("SUCCEEDED", ("Reboot Node", at(0)), kind="ReplaceNode")
    api.answer("GET", "/clusters/ml-cluster/operations", (200, {"operations": [listed]}))

    code, out, _ = run("operations", "list", "ml-cluster", "--kind", "ReplaceNode")

    assert code == 0
    assert api.requests[0]["url"].endswith("/clusters/ml-cluster/operations?kind=ReplaceNode")
    assert out.splitlines()[1].split()[:3] == ["op-1", "ReplaceNode", "SUCCEEDED"]


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


# --- the wait's progress --------------------------------------------------------------------------


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
