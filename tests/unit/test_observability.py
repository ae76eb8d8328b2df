"""The counts the handlers write (EMF). (No tracer: tests/unit/test_cold_start.py holds every handler
importable with only the layer's packages, which do not include the X-Ray SDK.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from autopilot.logic.budget_alerts import Handled
from autopilot.logic.healing.breaker import BreakerOutcome, announce_trip
from autopilot.models.records import HealingState
from autopilot.observability import Count, metrics
from autopilot.settings import HealingSettings

from tests.samples import ROOT, load_event

# --- counts (docs/operations.md, "Metrics and alarms") ---------------------------------------------


def _handler_module(function: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """functions/<function>/app.py as its own module, with the namespace the template's Globals set."""
    spec = importlib.util.spec_from_file_location(f"{function}_app", ROOT / "functions" / function / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _context(name: str) -> Any:
    return SimpleNamespace(
        function_name=name,
        memory_limit_in_mb=256,
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        aws_request_id="00000000-0000-4000-8000-000000000000",
    )


def _counts(output: str) -> dict[str, float]:
    """The Count metrics of the EMF documents a function printed, by name (values summed)."""
    counted: dict[str, float] = {}
    for line in output.splitlines():
        document = json.loads(line) if line.startswith("{") else {}
        for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
            assert directive["Namespace"] == "HyperPodAutopilot"
            assert ["service"] in directive["Dimensions"]
            assert document["service"] == "hyperpod-autopilot"
            for metric in directive["Metrics"]:
                assert metric["Unit"] == "Count"
                values = document[metric["Name"]]
                counted[metric["Name"]] = counted.get(metric["Name"], 0) + sum(
                    values if isinstance(values, list) else [values]
                )
    return counted


@pytest.fixture(autouse=True)
def _deployed_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The namespace and service the template's Globals give every function; no count left over."""
    monkeypatch.setattr(metrics.provider, "namespace", "HyperPodAutopilot")
    monkeypatch.setattr(metrics.provider, "service", "hyperpod-autopilot")
    metrics.clear_metrics()
    yield
    metrics.clear_metrics()


def test_the_session_guard_counts_the_sessions_it_terminated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _handler_module("session_guard", monkeypatch)
    guard = SimpleNamespace(sweep=lambda: {"terminated": 2, "kept": 3, "already_recorded": 1})
    monkeypatch.setattr(app, "deps", lambda: guard)

    app.lambda_handler(load_event("schedule/scheduled_event.json"), _context("SessionGuardFunction"))

    assert _counts(capsys.readouterr().out) == {Count.SESSIONS_TERMINATED: 2}


def test_the_cost_tagger_counts_the_clusters_whose_tags_it_repaired(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _handler_module("cost_tagger", monkeypatch)
    monkeypatch.setenv("STATE_TABLE_NAME", "state")
    monkeypatch.setenv("COST_TAG_KEYS", "owner=owner")
    monkeypatch.setattr(
        app, "sweep", lambda *_, **__: {"checked": 4, "repaired": 3, "failed": 1, "conflicts": 2}
    )

    app.lambda_handler(load_event("schedule/scheduled_event.json"), _context("CostTaggerFunction"))

    assert _counts(capsys.readouterr().out) == {Count.CLUSTER_TAGS_REPAIRED: 3, Count.COST_TAG_CONFLICTS: 2}


def test_a_breaker_trip_is_counted_once_with_its_alert(capsys: pytest.CaptureFixture[str]) -> None:
    published: list[dict[str, Any]] = []
    sns = SimpleNamespace(publish=lambda **kwargs: published.append(kwargs))
    events = SimpleNamespace(put_events=lambda **kwargs: {"FailedEntryCount": 0, "Entries": [{}]})
    state = HealingState(
        cluster_name="ml-cluster",
        paused=True,
        paused_by="breaker",
        paused_reason="3 of 10 nodes reported unhealthy",
        paused_at="2026-11-22T12:00:00Z",
        unhealthy_reports={"i-1": "2026-11-22T12:00:00Z", "i-2": "2026-11-22T12:00:00Z"},
        trip_alert_pending=True,
    )
    table = SimpleNamespace(claim_trip_alert=lambda cluster_name: True)
    settings = HealingSettings.from_environ(
        {
            "STATE_TABLE_NAME": "state",
            "REPLACE_NODE_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:replace",
            "ALERTS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alerts",
            "MAX_CONCURRENT_REPAIRS": "4",
            "MAX_UNHEALTHY_PERCENT": "20",
            "BREAKER_WINDOW_MINUTES": "10",
            "REBOOT_DEADLINE_MINUTES": "15",
            "HYPERPOD_REPAIR_DEADLINE_MINUTES": "90",
            "REPLACE_DEADLINE_MINUTES": "60",
            "DEEP_HEALTH_CHECK_MINUTES": "120",
            "ALLOW_LOGIN_REPLACE": "false",
            "DRAIN_TIMEOUT_MINUTES": "60",
        }
    )

    @metrics.log_metrics
    def handler(event: object, context: object) -> None:
        announce_trip(
            BreakerOutcome(state=state, tripped=True, node_count=10),
            table=cast(Any, table),
            settings=settings,
            sns=cast(Any, sns),
            events=cast(Any, events),
        )

    handler({}, None)

    assert len(published) == 1
    assert _counts(capsys.readouterr().out) == {Count.BREAKERS_TRIPPED: 1}


def test_budget_alerts_count_the_alerts_published_not_the_duplicates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _handler_module("budget_alerts", monkeypatch)
    event = load_event("budgets/sns_notification.json")
    event["Records"] = [event["Records"][0]] * 3
    answers = iter([Handled.PUBLISHED, Handled.DUPLICATE, Handled.PUBLISHED])
    monkeypatch.setattr(app, "deps", lambda: None)
    monkeypatch.setattr(app, "handle_notification", lambda *_: next(answers))

    app.lambda_handler(event, _context("BudgetAlertsFunction"))

    assert _counts(capsys.readouterr().out) == {Count.BUDGET_ALERTS_FIRED: 2}


def test_cluster_events_count_each_message_handled_not_the_failed_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _handler_module("cluster_events", monkeypatch)
    event = load_event("cluster_events/sqs_batch.json")
    failing = event["Records"][0]["messageId"]

    def handle(
        body: dict[str, Any], sent: int, waits: object, healing: object, origin: object, launches: object
    ) -> str:
        if body == json.loads(event["Records"][0]["body"]):
            raise RuntimeError("throttled")
        return "event"

    monkeypatch.setattr(app, "handle_message", handle)
    monkeypatch.setattr(app, "deps", lambda: app.Deps(waits=None, healing=None, launches=None))

    response = app.lambda_handler(event, _context("ClusterEventsFunction"))

    assert response["batchItemFailures"] == [{"itemIdentifier": failing}]
    assert _counts(capsys.readouterr().out) == {Count.CLUSTER_EVENTS_HANDLED: len(event["Records"]) - 1}


def test_an_invocation_that_counts_nothing_writes_no_warning() -> None:
    # A subprocess: pytest resets the warning filters per test, which would hide the module's own
    code = (
        "from autopilot.observability import metrics\n"
        "metrics.log_metrics(lambda event, context: None)({}, None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "POWERTOOLS_METRICS_NAMESPACE": "Test", "POWERTOOLS_SERVICE_NAME": "test"},
    )
    assert "No application metrics" not in done.stderr
