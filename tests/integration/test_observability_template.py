"""template.yaml's observability: every dead-letter queue alarmed, the breaker alarmed on the count the
code writes, a dashboard that shows every count, workflow, queue and alarm, every handler writing its
counts (docs/operations.md, "Metrics and alarms")."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from autopilot.observability import Count

from sandbox.emulator.deploy import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
GLOBAL_ENV: dict[str, str] = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
NAMESPACE = GLOBAL_ENV["POWERTOOLS_METRICS_NAMESPACE"]
SERVICE = GLOBAL_ENV["POWERTOOLS_SERVICE_NAME"]
EXECUTION_ENDS = [
    "ExecutionsStarted",
    "ExecutionsSucceeded",
    "ExecutionsFailed",
    "ExecutionsTimedOut",
    "ExecutionsAborted",
]


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r["Properties"] for name, r in RESOURCES.items() if r["Type"] == kind}


def _arn_target(value: Any) -> str | None:
    """The logical id a ``!GetAtt X.Arn`` names."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        name, attribute = value["Fn::GetAtt"]
        return str(name) if attribute == "Arn" else None
    return None


def dead_letter_queues() -> set[str]:
    """Every queue something dead-letters into: a rule target's DeadLetterConfig, a function's
    DeadLetterQueue, a queue's RedrivePolicy (found by how it is used, not by its name)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "DeadLetterConfig":
                    found.add(str(_arn_target(value["Arn"])))
                elif key == "DeadLetterQueue" and isinstance(value, dict) and value.get("Type") == "SQS":
                    found.add(str(_arn_target(value["TargetArn"])))
                elif key == "RedrivePolicy":
                    found.add(str(_arn_target(value["deadLetterTargetArn"])))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(RESOURCES)
    return found


def test_dead_letter_queues_are_found() -> None:
    queues = dead_letter_queues()

    assert {"ClusterEventsDeadLetterQueue", "OutcomeDeadLetterQueue", "SessionGuardDeadLetterQueue"} <= queues
    assert queues <= set(of_type("AWS::SQS::Queue"))


@pytest.mark.parametrize("queue", sorted(dead_letter_queues()))
def test_every_dead_letter_queue_has_an_alarm_to_the_alerts_topic(queue: str) -> None:
    def watches(alarm: dict[str, Any]) -> bool:
        return {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}} in alarm.get(
            "Dimensions", []
        )

    (alarm,) = [a for a in of_type("AWS::CloudWatch::Alarm").values() if watches(a)]

    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    # one message is enough: a dead letter is an event or a run that was lost
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": "AlertsTopic"}]


def test_the_breaker_alarm_watches_the_count_the_code_writes() -> None:
    alarm = of_type("AWS::CloudWatch::Alarm")["BreakersTrippedAlarm"]

    assert (alarm["Namespace"], alarm["MetricName"]) == (NAMESPACE, Count.BREAKERS_TRIPPED.value)
    # Powertools' only default dimension: a metric is found under exactly its dimensions
    assert alarm["Dimensions"] == [{"Name": "service", "Value": SERVICE}]
    assert (alarm["Statistic"], alarm["ComparisonOperator"], alarm["Threshold"]) == (
        "Sum",
        "GreaterThanThreshold",
        0,
    )
    assert alarm["AlarmActions"] == [{"Ref": "AlertsTopic"}]


def dashboard() -> dict[str, Any]:
    """The dashboard's body with each ``${X}`` / ``${X.Attr}`` left as the text ``<X>`` / ``<X.Attr>``."""
    (props,) = of_type("AWS::CloudWatch::Dashboard").values()
    body = props["DashboardBody"]["Fn::Sub"]
    assert isinstance(body, str)
    parsed: dict[str, Any] = json.loads(re.sub(r"\$\{([\w:.]+)\}", r"<\1>", body))
    return parsed


def shown_metrics() -> list[tuple[str, ...]]:
    """Each metric of the dashboard's metric widgets as (namespace, name, dimension, value...)."""
    return [
        tuple(str(part) for part in line if not isinstance(part, dict))
        for widget in dashboard()["widgets"]
        if widget["type"] == "metric"
        for line in widget["properties"]["metrics"]
        if not isinstance(line[0], dict)
    ]


@pytest.mark.parametrize("count", list(Count))
def test_the_dashboard_shows_every_count(count: Count) -> None:
    assert (NAMESPACE, count.value, "service", SERVICE) in shown_metrics()


@pytest.mark.parametrize("state_machine", sorted(of_type("AWS::Serverless::StateMachine")))
def test_the_dashboard_shows_every_workflows_executions(state_machine: str) -> None:
    for metric in EXECUTION_ENDS:
        assert ("AWS/States", metric, "StateMachineArn", f"<{state_machine}>") in shown_metrics()


@pytest.mark.parametrize("queue", sorted(dead_letter_queues()))
def test_the_dashboard_shows_every_dead_letter_queues_depth(queue: str) -> None:
    assert (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        f"<{queue}.QueueName>",
    ) in shown_metrics()


def test_the_dashboard_shows_every_alarm_and_the_spend_per_cluster() -> None:
    widgets = dashboard()["widgets"]
    (alarms,) = [w["properties"]["alarms"] for w in widgets if w["type"] == "alarm"]
    expressions = [
        line[0]["expression"]
        for w in widgets
        if w["type"] == "metric"
        for line in w["properties"]["metrics"]
        if isinstance(line[0], dict)
    ]

    assert sorted(alarms) == sorted(f"<{name}.Arn>" for name in of_type("AWS::CloudWatch::Alarm"))
    # SpendMeterFunction writes its figures per ClusterName (autopilot.logic.spend_meter)
    assert any(f"{{{NAMESPACE},ClusterName,service}}" in e and "MonthToDateUsd" in e for e in expressions)


@pytest.mark.parametrize("handler", sorted(ROOT.glob("functions/*/app.py")), ids=lambda p: p.parent.name)
def test_every_handler_writes_its_counts(handler: Path) -> None:
    """A count added anywhere in a use case reaches CloudWatch only through the handler's flush."""
    tree = ast.parse(handler.read_text())
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "lambda_handler"]

    assert "metrics.log_metrics" in [ast.unparse(d) for d in function.decorator_list]
