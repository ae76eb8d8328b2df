"""The demo runner's own logic with a fake environment: registry, exit codes, report, timeline."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox.apps.demo import main
from sandbox.apps.demo.runner import (
    ControlPlaneMetrics,
    DemoContext,
    DemoOptions,
    ScenarioRegistry,
    Timeline,
    TimelineEntry,
    format_entry,
    load_scenarios,
    run_demo,
    workflow_label,
)

LINE = re.compile(r"^ *\d+\.\d\ds  (?P<scenario>\S+) +(?P<kind>[A-Z]+) +(?P<text>.+)$")


class FakeEnvironment:
    """Counts one AWS call and one Lambda invocation per scenario that asks for it."""

    description = "fake control plane"
    api: Any = None

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.faults: list[tuple[str, dict[str, Any]]] = []

    def aws(self, service: str) -> Any:
        raise AssertionError("the runner itself must not call AWS")

    def apply_fault(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        self.faults.append((name, dict(params)))
        return {"applied": name}

    def advance_clock(self, seconds: float) -> None:
        raise AssertionError("the runner itself must not move the clock")

    def stack_output(self, name: str) -> str:
        return f"arn:{name}"

    def slurm(self, cluster: str) -> dict[str, Any] | None:
        raise AssertionError("the runner itself must not look at Slurm")

    def touch(self) -> None:
        self.calls["sagemaker:CreateCluster"] = self.calls.get("sagemaker:CreateCluster", 0) + 1

    def metrics(self) -> ControlPlaneMetrics:
        return ControlPlaneMetrics(dict(self.calls), {"ApiFunction": sum(self.calls.values())})

    def state_transitions(self) -> int:
        return 7


@pytest.fixture
def fake() -> FakeEnvironment:
    return FakeEnvironment()


@pytest.fixture
def registry(fake: FakeEnvironment) -> ScenarioRegistry:
    scenarios = ScenarioRegistry()

    @scenarios.scenario("passes", "a scenario whose checks hold")
    def passes(ctx: DemoContext) -> None:
        fake.touch()
        ctx.fault("capacity", instance_type="ml.p5.48xlarge")
        ctx.check(True, "the thing holds")
        ctx.summary = "all good"

    @scenarios.scenario("fails_a_check", "a scenario whose check does not hold")
    def fails_a_check(ctx: DemoContext) -> None:
        ctx.check(1 + 1 == 3, "arithmetic works", "1 + 1 is 2")

    @scenarios.scenario("crashes", "a scenario that raises")
    def crashes(ctx: DemoContext) -> None:
        raise KeyError("clusterArn")

    return scenarios


def run(
    registry: ScenarioRegistry, fake: FakeEnvironment, tmp_path: Path, *names: str
) -> tuple[int, dict[str, Any], str]:
    @contextlib.contextmanager
    def environment(options: DemoOptions) -> Iterator[FakeEnvironment]:
        yield fake

    out = io.StringIO()
    report_path = tmp_path / "build" / "demo-report.json"
    code = run_demo(
        DemoOptions(scenarios=names, report_path=report_path),
        registry=registry,
        environment=environment,
        out=out,
    )
    return code, json.loads(report_path.read_text()), out.getvalue()


def test_all_passing_exits_zero_with_the_report(
    registry: ScenarioRegistry, fake: FakeEnvironment, tmp_path: Path
) -> None:
    code, report, printed = run(registry, fake, tmp_path, "passes")

    assert code == 0
    assert report["scenarios"] == [
        {
            "name": "passes",
            "passed": True,
            "duration_s": report["scenarios"][0]["duration_s"],
            "details": {
                "checks": ["the thing holds"],
                "aws_calls": {"sagemaker:CreateCluster": 1},
                "lambda_invocations": 1,
            },
        }
    ]
    assert report["aws_calls"] == {"sagemaker:CreateCluster": 1}
    assert report["state_transitions"] == 7
    assert report["lambda_invocations"] == 1
    assert fake.faults == [("capacity", {"instance_type": "ml.p5.48xlarge"})]
    assert "1/1 scenarios passed" in printed


def test_a_failed_check_fails_the_run_with_its_reason(
    registry: ScenarioRegistry, fake: FakeEnvironment, tmp_path: Path
) -> None:
    code, report, printed = run(registry, fake, tmp_path, "passes", "fails_a_check", "crashes")

    assert code == 1
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert by_name["passes"]["passed"] is True
    assert by_name["fails_a_check"]["passed"] is False
    assert by_name["fails_a_check"]["details"]["failure"] == "arithmetic works: 1 + 1 is 2"
    assert by_name["crashes"]["passed"] is False
    assert by_name["crashes"]["details"]["failure"] == "KeyError: 'clusterArn'"
    assert "KeyError" in by_name["crashes"]["details"]["traceback"]
    assert report["passed"] is False
    summary = printed[printed.index("scenario ") :]
    assert re.search(r"^fails_a_check +FAIL +\d+\.\d\ds  arithmetic works: 1 \+ 1 is 2$", summary, re.M)
    assert re.search(r"^passes +PASS +\d+\.\d\ds  all good$", summary, re.M)
    assert "1/3 scenarios passed" in printed


def test_an_environment_that_does_not_start_fails_every_scenario(
    registry: ScenarioRegistry, tmp_path: Path
) -> None:
    @contextlib.contextmanager
    def broken(options: DemoOptions) -> Iterator[FakeEnvironment]:
        raise RuntimeError("template.yaml: unsupported resource type")
        yield FakeEnvironment()  # pragma: no cover - never reached

    report_path = tmp_path / "report.json"
    code = run_demo(
        DemoOptions(scenarios=("passes",), report_path=report_path),
        registry=registry,
        environment=broken,
        out=io.StringIO(),
    )

    report = json.loads(report_path.read_text())
    assert code == 1
    assert report["scenarios"][0]["passed"] is False
    assert "unsupported resource type" in report["scenarios"][0]["details"]["failure"]
    assert report["environment_error"] == "RuntimeError: template.yaml: unsupported resource type"


def test_timeline_lines_show_elapsed_scenario_kind_workflow_and_duration(
    registry: ScenarioRegistry, fake: FakeEnvironment, tmp_path: Path
) -> None:
    _, _, printed = run(registry, fake, tmp_path, "passes", "fails_a_check")

    entries = [m.groupdict() for line in printed.splitlines() if (m := LINE.match(line))]
    assert [(e["scenario"], e["kind"]) for e in entries] == [
        ("demo", "INFO"),
        ("passes", "FAULT"),
        ("passes", "CHECK"),
        ("fails_a_check", "FAIL"),
    ]
    assert entries[1]["text"] == "capacity(instance_type=ml.p5.48xlarge)"
    line = format_entry(
        TimelineEntry(
            12.345, "create_cluster", "STEP", "Wait For Cluster", "CreateClusterStateMachine op-1", 2.1
        )
    )
    assert line == (
        "   12.35s  create_cluster               STEP  Wait For Cluster"
        "  [CreateClusterStateMachine op-1]  (2.10 s)"
    )


def test_timeline_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="timeline kind"):
        Timeline(io.StringIO()).record("s", "WHATEVER", "text")


def test_registering_is_one_decorator_and_names_are_unique() -> None:
    scenarios = ScenarioRegistry()

    @scenarios.scenario("first_one", "shows something")
    def first_one(ctx: DemoContext) -> None: ...

    assert scenarios.names() == ["first_one"]
    with pytest.raises(ValueError, match="registered twice"):
        scenarios.scenario("first_one", "again")(first_one)
    with pytest.raises(ValueError, match="snake_case"):
        scenarios.scenario("Bad Name", "no")


def test_a_final_scenario_runs_after_every_other_whatever_its_registration() -> None:
    scenarios = ScenarioRegistry()
    for name, final in [("make", False), ("clean_up", True), ("heal", False)]:
        scenarios.scenario(name, "shows something", final=final)(lambda ctx: None)

    assert scenarios.names() == ["make", "heal", "clean_up"]
    assert [s.name for s in scenarios.select(None)] == ["make", "heal", "clean_up"]
    assert [s.name for s in scenarios.select(["clean_up", "make"])] == ["clean_up", "make"]  # as asked


def test_the_scenarios_are_discovered_in_the_story_s_order() -> None:
    assert load_scenarios().names() == [
        "validate_rejects_bad_config",
        "create_cluster",
        "create_fails_for_capacity",
        "create_fails_lifecycle_script",
        "node_failure_replace",
        "duplicate_events_ignored",
        "healing_breaker_trips",
        "slurm_job_survives_repair",
        "session_limits",
        "cost_tags_drift_repaired",
        "budget_alert",
        "department_chargeback",
        "cleanup_leaves_nothing",
    ]


def test_demo_command_rejects_an_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenario", "no_such_scenario"]) == 2
    assert "no scenario named 'no_such_scenario'" in capsys.readouterr().err


def test_demo_command_lists_the_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    assert re.search(r"^create_cluster +POST /clusters", capsys.readouterr().out, re.M)


def test_workflow_label_names_the_state_machine_and_execution() -> None:
    arn = (
        "arn:aws:states:us-east-1:123456789012:execution:"
        "hyperpod-autopilot-CleanupClusterStateMachine-ZYIH68TIM4HI:op-20261121141837-dec9fa49"
    )
    assert workflow_label(arn) == "CleanupClusterStateMachine op-20261121141837-dec9fa49"
