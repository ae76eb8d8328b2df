"""ClusterEventsFunction's logic on an in-memory state table: registry versions, waiters, resumes.

Events come from events/hyperpod (AWS's samples) and events/cluster_events (the SQS batch the
function gets), varied with small builders.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from autopilot.logic.cluster_events import UNTRUSTED, Origin, UnknownMessageError, handle_message
from autopilot.workflows.cluster_waits import ClusterWaits, StatusVersion, Waiter

from tests.samples import load_event

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "sample-cluster"
ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
# the function's own account and region (the samples' events come from there)
ORIGIN = Origin(account="111122223333", region="us-west-2")


class MemoryWaits(ClusterWaits):
    """The DynamoDB items and SendTaskSuccess as dicts and lists, with the same guards."""

    def __init__(self, *, registered: bool = True, sagemaker_status: str = "Creating") -> None:
        super().__init__("unused")
        self.clusters: dict[str, dict[str, str]] = {CLUSTER: {}} if registered else {}
        self.stored: dict[tuple[str, str], Waiter] = {}
        self.answered: list[tuple[str, dict[str, Any]]] = []
        self.open_tokens: set[str] = set()
        self.sagemaker_status = sagemaker_status

    def put_waiter(self, waiter: Waiter) -> bool:
        key = (waiter.cluster_name, waiter.execution_arn)
        if key in self.stored and self.stored[key].sent_at > waiter.sent_at:
            return False
        self.stored[key] = waiter
        self.open_tokens.add(waiter.task_token)
        return True

    def waiters(self, cluster_name: str) -> list[Waiter]:
        return [w for (name, _), w in self.stored.items() if name == cluster_name]

    def remove_waiter(self, waiter: Waiter) -> None:
        key = (waiter.cluster_name, waiter.execution_arn)
        if key in self.stored and self.stored[key].task_token == waiter.task_token:
            del self.stored[key]

    def succeed(self, waiter: Waiter, output: dict[str, Any]) -> bool:
        if waiter.task_token not in self.open_tokens:
            return False
        self.open_tokens.discard(waiter.task_token)
        self.answered.append((waiter.task_token, output))
        return True

    def describe_status(self, cluster_name: str) -> tuple[str, str]:
        return self.sagemaker_status, ""

    def registered_arn(self, cluster_name: str) -> str | None:
        return ARN if cluster_name in self.clusters else None

    def record_status(self, cluster_name: str, cluster_arn: str, status: str, version: StatusVersion) -> bool:
        record = self.clusters.get(cluster_name)
        if record is None or record.get("version", "") >= version.key():
            return False
        record.update(status=status, version=version.key())
        return True


def state_change(status: str, time: str = "2025-04-28T16:59:01Z", failure: str = "") -> dict[str, Any]:
    event = copy.deepcopy(load_event("hyperpod/cluster_state_change.json"))
    event["time"] = time
    event["detail"]["ClusterStatus"] = status
    event["detail"]["FailureMessage"] = failure
    return event


def await_request(
    until: str = "InService", token: str = "token-1", execution: str = "exec-1"
) -> dict[str, Any]:
    return {
        "autopilot": "await-cluster",
        "clusterName": CLUSTER,
        "until": until,
        "taskToken": token,
        "executionArn": execution,
    }


def test_a_waiter_is_resumed_by_the_state_change_it_waits_for() -> None:
    waits = MemoryWaits()
    handle_message(await_request(), 1, waits, origin=ORIGIN)
    assert waits.answered == []  # still Creating: it waits

    handle_message(state_change("Creating", "2025-04-28T16:50:00Z"), 2, waits, origin=ORIGIN)
    handle_message(state_change("InService"), 3, waits, origin=ORIGIN)

    assert waits.answered == [("token-1", {"ClusterStatus": "InService", "FailureMessage": ""})]
    assert waits.stored == {}
    assert waits.clusters[CLUSTER]["status"] == "InService"


def test_a_wait_request_after_the_event_is_answered_at_once() -> None:
    waits = MemoryWaits(sagemaker_status="InService")
    handle_message(state_change("InService"), 1, waits, origin=ORIGIN)  # nobody waited yet

    handle_message(await_request(), 2, waits, origin=ORIGIN)

    assert waits.answered == [("token-1", {"ClusterStatus": "InService", "FailureMessage": ""})]


def test_a_failed_cluster_resumes_the_wait_with_its_failure() -> None:
    waits = MemoryWaits()
    handle_message(await_request(), 1, waits, origin=ORIGIN)

    handle_message(
        state_change("Failed", failure="InsufficientInstanceCapacity for ml.p5.48xlarge"),
        2,
        waits,
        origin=ORIGIN,
    )

    [(_, output)] = waits.answered
    assert output == {
        "ClusterStatus": "Failed",
        "FailureMessage": "InsufficientInstanceCapacity for ml.p5.48xlarge",
    }


def test_duplicates_change_nothing_and_answer_once() -> None:
    waits = MemoryWaits()
    handle_message(await_request(), 1, waits, origin=ORIGIN)
    event = state_change("InService")

    handle_message(event, 2, waits, origin=ORIGIN)
    handle_message(event, 3, waits, origin=ORIGIN)
    handle_message(await_request(), 1, waits, origin=ORIGIN)  # the wait request redelivered too

    assert len(waits.answered) == 1


def test_an_older_event_arriving_late_does_not_win() -> None:
    waits = MemoryWaits()
    handle_message(state_change("InService", "2025-04-28T17:00:00Z"), 1, waits, origin=ORIGIN)
    handle_message(await_request(until="Deleted"), 2, waits, origin=ORIGIN)

    handle_message(state_change("Creating", "2025-04-28T16:40:00Z"), 3, waits, origin=ORIGIN)

    assert waits.clusters[CLUSTER]["status"] == "InService"
    assert waits.answered == []


def test_two_reports_of_the_same_second_are_ordered_by_the_lifecycle() -> None:
    waits = MemoryWaits()
    handle_message(state_change("InService", "2025-04-28T17:00:00Z"), 1, waits, origin=ORIGIN)
    handle_message(state_change("Creating", "2025-04-28T17:00:00Z"), 2, waits, origin=ORIGIN)

    assert waits.clusters[CLUSTER]["status"] == "InService"


def test_a_later_wait_of_the_same_execution_replaces_the_earlier_and_an_older_one_is_ignored() -> None:
    waits = MemoryWaits()
    handle_message(await_request(token="second"), 20, waits, origin=ORIGIN)
    handle_message(await_request(token="first"), 10, waits, origin=ORIGIN)  # redelivered late

    handle_message(state_change("InService"), 30, waits, origin=ORIGIN)

    assert [token for token, _ in waits.answered] == ["second"]


def test_clusters_outside_the_registry_are_not_adopted_by_an_event() -> None:
    waits = MemoryWaits(registered=False)

    handle_message(state_change("InService"), 1, waits, origin=ORIGIN)

    assert waits.clusters == {}


def test_cluster_events_are_parsed_and_touch_nothing() -> None:
    # (Node Health events drive healing: tests/unit/test_cluster_events_health.py)
    waits = MemoryWaits()

    kind = handle_message(load_event("hyperpod/cluster_event.json"), 1, waits, origin=ORIGIN)

    assert kind.startswith("SageMaker HyperPod")
    assert waits.clusters == {CLUSTER: {}}
    assert waits.answered == []


@pytest.mark.parametrize(
    "body",
    [
        {"detail-type": "Something Else", "detail": {}},
        {**state_change("InService"), "detail": {"ClusterName": CLUSTER}},
        {"autopilot": "await-cluster", "clusterName": CLUSTER},
    ],
    ids=["unknown", "not-aws-shape", "await-without-token"],
)
def test_a_message_of_another_shape_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises((UnknownMessageError, ValueError)):
        handle_message(body, 1, MemoryWaits(), origin=ORIGIN)


def test_the_handler_reports_only_the_failed_record_of_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location(
        "cluster_events_app", ROOT / "functions/cluster_events/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    waits = MemoryWaits(sagemaker_status="Creating")
    # the batch holds no Node Health event, nor any scale or failed launch
    monkeypatch.setattr(app, "deps", lambda: app.Deps(waits=waits, healing=None, launches=None))
    monkeypatch.setattr(app.metrics.provider, "namespace", "Test")  # the template's Globals set it
    event = load_event("cluster_events/sqs_batch.json")
    broken = copy.deepcopy(event["Records"][0])
    broken["messageId"] = "broken"
    broken["body"] = json.dumps({"detail-type": "Something Else"})
    event["Records"].append(broken)

    response = app.lambda_handler(event, _context())

    assert response == {"batchItemFailures": [{"itemIdentifier": "broken"}]}
    # the batch's wait request, then the sample's InService event: the workflow was resumed
    assert [token for token, _ in waits.answered] == ["AQCEAAAAKgAAAAMAAAAAAAAAAexample-task-token"]


def test_a_batch_whose_every_message_fails_comes_back_whole_each_failure_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # SQS's partial batch response written by hand (no Powertools batch utility): every message is
    # reported, so SQS delivers them all again, and the invocation itself succeeds.
    spec = importlib.util.spec_from_file_location(
        "cluster_events_app", ROOT / "functions/cluster_events/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    monkeypatch.setattr(app, "deps", lambda: app.Deps(waits=MemoryWaits(), healing=None, launches=None))
    monkeypatch.setattr(app.metrics.provider, "namespace", "Test")
    event = load_event("cluster_events/sqs_batch.json")
    for index, record in enumerate(event["Records"]):
        record["messageId"] = f"broken-{index}"
        record["body"] = json.dumps({"detail-type": "Something Else"})

    response = app.lambda_handler(event, _context())

    ids = [f"broken-{index}" for index in range(len(event["Records"]))]
    assert response == {"batchItemFailures": [{"itemIdentifier": i} for i in ids]}
    failed = [r for r in caplog.records if r.getMessage() == "message failed: SQS delivers it again"]
    assert [(r.levelname, getattr(r, "message_id", None)) for r in failed] == [("ERROR", i) for i in ids]
    assert all(r.exc_info and r.exc_info[0] is UnknownMessageError for r in failed)


def _context() -> Any:
    class Context:
        function_name = "ClusterEventsFunction"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-west-2:111122223333:function:ClusterEventsFunction"
        aws_request_id = "00000000-0000-4000-8000-000000000000"

    return Context()


def _forged(**changes: Any) -> dict[str, Any]:
    event = state_change("Failed", failure="forged")
    detail = changes.pop("detail", {})
    event.update(changes)
    event["detail"].update(detail)
    return event


@pytest.mark.parametrize(
    "forged",
    [
        _forged(source="custom.sagemaker"),
        _forged(account="444455556666"),
        _forged(region="eu-west-1"),
        # the same cluster name, another cluster (another account's, or one recreated outside Autopilot)
        _forged(detail={"ClusterArn": "arn:aws:sagemaker:us-west-2:444455556666:cluster/sample-cluster"}),
        _forged(detail={"ClusterArn": "arn:aws:sagemaker:us-west-2:111122223333:cluster/0abcdef12345"}),
    ],
    ids=["source", "account", "region", "other-account-arn", "other-cluster-arn"],
)
def test_an_event_not_from_sagemaker_for_the_registered_cluster_is_dropped_without_error(
    forged: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    waits = MemoryWaits()
    handle_message(await_request(), 1, waits, origin=ORIGIN)

    assert handle_message(forged, 2, waits, origin=ORIGIN) == UNTRUSTED

    # the create waiting on the cluster is not told it failed, the registry keeps its status
    assert waits.answered == []
    assert waits.clusters[CLUSTER] == {}
    assert any(
        r.levelname == "WARNING" and "untrusted event dropped" in r.getMessage() for r in caplog.records
    )


def test_node_health_and_cluster_events_are_authenticated_too() -> None:
    waits = MemoryWaits()
    health = copy.deepcopy(load_event("hyperpod/cluster_node_health_event.json"))
    health["account"] = "444455556666"
    event = copy.deepcopy(load_event("hyperpod/cluster_event.json"))
    event["source"] = "custom.sagemaker"

    # no healing dependencies are needed: the event is dropped before any is used
    assert handle_message(health, 1, waits, origin=ORIGIN) == UNTRUSTED
    assert handle_message(event, 1, waits, origin=ORIGIN) == UNTRUSTED


def test_the_origin_is_the_functions_own_account_and_region() -> None:
    origin = Origin.of_function("arn:aws:lambda:eu-central-1:210987654321:function:Events:live")
    assert origin == Origin(account="210987654321", region="eu-central-1")


def test_a_status_version_is_stored_as_the_event_times_utc_text_then_its_rank() -> None:
    # the stored versions compare as text (a condition expression): the time as EventBridge writes it
    at = datetime(2026, 11, 28, 8, 0, 5, tzinfo=UTC)

    assert StatusVersion(time=at, rank=3).key() == "2026-11-28T08:00:05Z#03"
    # the same instant with an offset is the same version
    plus_two = at.astimezone(timezone(timedelta(hours=2)))
    assert StatusVersion(time=plus_two, rank=3).key() == "2026-11-28T08:00:05Z#03"
