"""The demo runner: a scenario registry, a timeline a person can follow, a summary table, a report.

A scenario is a function of a ``DemoContext``, registered with one decorator:

    @scenario("create_cluster", "POST /clusters -> SUCCEEDED, InService, tagged, budget, event")
    def create_cluster(ctx: DemoContext) -> None:
        accepted = ctx.call("POST /clusters", lambda: ctx.api.create_cluster(body))
        operation = ctx.wait_for_operation(accepted["operationId"])
        ctx.check(operation["status"] == "SUCCEEDED", "operation SUCCEEDED", str(operation.get("error")))

Every module ``sandbox/apps/demo/scenarios_*.py`` is imported by ``load_scenarios()``, so a capability
adds its scenarios by adding such a module; nothing here changes. Scenarios reach the control plane
through public surfaces only: the HTTP API (``ctx.api``, SigV4-signed), AWS APIs (``ctx.aws``, to
observe what the control plane did) and the simulators' fault injection (``ctx.fault``).

The report (``build/demo-report.json``)::

    {"scenarios": [{"name", "passed", "duration_s", "details"}],
     "aws_calls": {"<service>:<Operation>": count},   # the control plane's calls, not the demo's checks
     "state_transitions": N,                          # *StateEntered events over every execution
     "lambda_invocations": N, ...}

Where the scenarios run (the embedded Sandbox, its parameters, metrics) is sandbox/apps/demo/environment.py.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO, TypeVar

from autopilot_cli.client import ApiError, AutopilotClient

from sandbox.apps.demo.environment import (
    DEFAULT_REPORT,
    DEFAULT_SPEED,
    DEMO_PARAMETERS,
    DEMO_RUN_PARAMETERS,
    ControlPlaneMetrics,
    DemoEnvironment,
    DemoOptions,
    EnvironmentFactory,
    SandboxEnvironment,
    count_state_transitions,
    sandbox_api_client,
    sandbox_environment,
    state_entries,
)

T = TypeVar("T")
ScenarioFunction = Callable[["DemoContext"], None]


OPERATION_TIMEOUT_S: Final = 90.0
POLL_S: Final = 0.2
_SCENARIO_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
_STATE_MACHINE: Final = re.compile(r"([A-Za-z0-9]+StateMachine)")
NAME_WIDTH: Final = 28


# --------------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    run: ScenarioFunction
    final: bool = False  # runs after every other scenario (e.g. the cleanup of what they left)


class UnknownScenarioError(ValueError):
    """A scenario name that is not registered (the CLI's usage error)."""


class ScenarioRegistry:
    """Scenarios by name, in registration order."""

    def __init__(self) -> None:
        self._scenarios: dict[str, Scenario] = {}

    def scenario(
        self, name: str, summary: str, *, final: bool = False
    ) -> Callable[[ScenarioFunction], ScenarioFunction]:
        """Register the decorated function as scenario ``name`` (what it shows: ``summary``); a
        ``final`` one runs after all the others."""
        if not _SCENARIO_NAME.fullmatch(name):
            raise ValueError(f"scenario name {name!r} must be snake_case ({_SCENARIO_NAME.pattern})")

        def register(function: ScenarioFunction) -> ScenarioFunction:
            if name in self._scenarios:
                raise ValueError(f"scenario {name!r} is registered twice")
            self._scenarios[name] = Scenario(name, summary, function, final)
            return function

        return register

    def names(self) -> list[str]:
        """Registration order, final scenarios last."""
        return [s.name for s in self._ordered()]

    def _ordered(self) -> list[Scenario]:
        every = list(self._scenarios.values())
        return [s for s in every if not s.final] + [s for s in every if s.final]

    def get(self, name: str) -> Scenario:
        try:
            return self._scenarios[name]
        except KeyError:
            known = ", ".join(self._scenarios) or "none"
            raise UnknownScenarioError(f"no scenario named {name!r} (known: {known})") from None

    def select(self, names: Sequence[str] | None) -> list[Scenario]:
        """The named scenarios in the order given (duplicates once); all of them when ``names`` is empty."""
        if not names:
            return self._ordered()
        return [self.get(name) for name in dict.fromkeys(names)]


REGISTRY: Final = ScenarioRegistry()
scenario: Final = REGISTRY.scenario


# The story's order: a cluster is made, then healed, then governed (the others follow by name).
MODULE_ORDER: Final = ("scenarios_lifecycle", "scenarios_healing", "scenarios_slurm", "scenarios_governance")


def load_scenarios() -> ScenarioRegistry:
    """Import every ``sandbox.apps.demo.scenarios_*`` module (MODULE_ORDER first, then by name)."""
    # This module's folder is the package's (importing sandbox.apps.demo here would import its importer back).
    here = [str(Path(__file__).parent)]
    found = sorted(info.name for info in pkgutil.iter_modules(here) if info.name.startswith("scenarios_"))
    first = [name for name in MODULE_ORDER if name in found]
    for name in [*first, *(n for n in found if n not in first)]:
        importlib.import_module(f"sandbox.apps.demo.{name}")
    return REGISTRY


# --------------------------------------------------------------------------------------------------
# timeline
# --------------------------------------------------------------------------------------------------
KINDS: Final = ("INFO", "API", "STEP", "DONE", "CHECK", "FAULT", "FAIL")


@dataclass(frozen=True)
class TimelineEntry:
    elapsed_s: float
    scenario: str
    kind: str  # one of KINDS
    text: str
    workflow: str | None = None
    duration_s: float | None = None


def format_entry(entry: TimelineEntry) -> str:
    """One timeline line: elapsed, scenario, kind, text, then ``[workflow execution]`` and ``(duration)``.

    ``12.34s  create_cluster   STEP  Wait For Cluster  [CreateClusterStateMachine op-…]  (2.14 s)``
    """
    line = f"{entry.elapsed_s:8.2f}s  {entry.scenario:<{NAME_WIDTH}} {entry.kind:<5} {entry.text}"
    if entry.workflow:
        line += f"  [{entry.workflow}]"
    if entry.duration_s is not None:
        line += f"  ({entry.duration_s:.2f} s)"
    return line


class Timeline:
    """What happened, when (seconds since the demo started), printed as it happens."""

    def __init__(self, out: TextIO, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.entries: list[TimelineEntry] = []
        self._monotonic = monotonic
        self._start = monotonic()

    def elapsed(self) -> float:
        return self._monotonic() - self._start

    def record(
        self,
        scenario: str,
        kind: str,
        text: str,
        *,
        workflow: str | None = None,
        duration_s: float | None = None,
    ) -> TimelineEntry:
        if kind not in KINDS:
            raise ValueError(f"timeline kind {kind!r} is not one of {KINDS}")
        entry = TimelineEntry(round(self.elapsed(), 3), scenario, kind, text, workflow, duration_s)
        self.entries.append(entry)
        print(format_entry(entry), file=self.out, flush=True)
        return entry

    def say(self, text: str = "") -> None:
        """A line outside the timeline (headers, the summary)."""
        print(text, file=self.out, flush=True)


# --------------------------------------------------------------------------------------------------
# what a scenario sees
# --------------------------------------------------------------------------------------------------
class ScenarioFailed(Exception):
    """A check did not hold; the message is the reason the report gives."""


class DemoContext:
    """One scenario's handle on the environment, its timeline and its report details."""

    def __init__(
        self,
        scenario: Scenario,
        env: DemoEnvironment,
        timeline: Timeline,
        shared: dict[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.scenario = scenario
        self.env = env
        self.timeline = timeline
        self.shared = shared  # what one scenario leaves for a later one (e.g. a cluster to clean up)
        self.details: dict[str, Any] = {"checks": []}
        self.summary = ""
        self.executions: list[str] = []
        self._sleep = sleep

    @property
    def api(self) -> AutopilotClient:
        return self.env.api

    def aws(self, service: str) -> Any:
        return self.env.aws(service)

    def log(
        self, kind: str, text: str, *, workflow: str | None = None, duration_s: float | None = None
    ) -> None:
        self.timeline.record(self.scenario.name, kind, text, workflow=workflow, duration_s=duration_s)

    def info(self, text: str) -> None:
        self.log("INFO", text)

    def check(self, condition: bool, what: str, why_not: str = "") -> None:
        """Assert for real: a false condition fails the scenario with ``what`` and ``why_not``."""
        if not condition:
            raise ScenarioFailed(f"{what}: {why_not}" if why_not else what)
        self.details["checks"].append(what)
        self.log("CHECK", what)

    def fail(self, reason: str) -> None:
        raise ScenarioFailed(reason)

    def call(self, label: str, action: Callable[[], T], describe: Callable[[T], str] | None = None) -> T:
        """Make an API request, timed; an API error fails the scenario with its status and message."""
        started = time.monotonic()
        try:
            result = action()
        except ApiError as error:
            took = time.monotonic() - started
            self.log("API", f"{label} -> {error.status} {error.message}", duration_s=took)
            raise ScenarioFailed(
                f"{label} answered {error.status}: {error.message} {error.errors or ''}".rstrip()
            ) from error
        took = time.monotonic() - started
        self.log("API", f"{label} -> {describe(result) if describe else 'ok'}", duration_s=took)
        return result

    def expect_api_error(self, label: str, action: Callable[[], Any], status: int) -> ApiError:
        """Make a request that must fail with ``status``; returns the error for its details."""
        started = time.monotonic()
        try:
            action()
        except ApiError as error:
            took = time.monotonic() - started
            self.log("API", f"{label} -> {error.status} {error.message}", duration_s=took)
            self.check(error.status == status, f"{label} is refused with {status}", f"got {error.status}")
            return error
        raise ScenarioFailed(f"{label} succeeded; expected HTTP {status}")

    def fault(self, name: str, **params: Any) -> dict[str, Any]:
        result = self.env.apply_fault(name, params)
        shown = ", ".join(f"{k}={v}" for k, v in params.items())
        self.log("FAULT", f"{name}({shown})")
        return result

    def wait_until(
        self, what: str, probe: Callable[[], T | None], *, timeout_s: float = 30.0, interval_s: float = POLL_S
    ) -> T:
        """Poll ``probe`` until it returns something other than None; fail the scenario at the deadline."""
        started = time.monotonic()
        while True:
            found = probe()
            if found is not None:
                return found
            if time.monotonic() - started > timeout_s:
                raise ScenarioFailed(f"timed out after {timeout_s:g} s waiting for {what}")
            self._sleep(interval_s)

    def wait_for_operation(
        self, operation_id: str, *, timeout_s: float = OPERATION_TIMEOUT_S
    ) -> dict[str, Any]:
        """Follow GET /operations/{id} to SUCCEEDED/FAILED, putting each workflow step on the timeline.

        The workflow records the outcome before its last states run (a rollback, the result event),
        so once the status is final this waits for the execution to end and reads the record again:
        the operation returned is the workflow's last word.
        """
        started = time.monotonic()
        shown = 0
        workflow: str | None = None
        transitions: int | None = None
        settled = False
        while True:
            operation = self.api.get_operation(operation_id)
            if workflow is None and operation.get("executionArn"):
                workflow = workflow_label(str(operation["executionArn"]))
                self.executions.append(str(operation["executionArn"]))
            steps: list[dict[str, Any]] = operation.get("steps") or []
            # A step is done when the next one starts; the last one when the workflow has ended.
            done = len(steps) if settled else max(len(steps) - 1, 0)
            for index in range(shown, done):
                following = (
                    steps[index + 1]["enteredAt"] if index + 1 < len(steps) else operation["updatedAt"]
                )
                self.log(
                    "STEP",
                    str(steps[index]["name"]),
                    workflow=workflow,
                    duration_s=seconds_between(steps[index]["enteredAt"], following),
                )
            shown = max(shown, done)
            if settled:
                break
            if operation.get("status") in ("SUCCEEDED", "FAILED"):
                transitions = self._finished_execution_transitions(operation)
                settled = True
                continue
            if time.monotonic() - started > timeout_s:
                raise ScenarioFailed(
                    f"operation {operation_id} still {operation.get('status')} after {timeout_s:g} s"
                )
            self._sleep(POLL_S)
        error = operation.get("error") or {}
        outcome = f"{operation['kind']} {operation['status']}"
        if error:
            outcome += f" ({error.get('error')})"
        if transitions is not None:
            outcome += f", {transitions} state transitions"
        self.log("DONE", outcome, workflow=workflow, duration_s=time.monotonic() - started)
        self.details.setdefault("operations", []).append(
            {
                "operationId": operation_id,
                "kind": operation.get("kind"),
                "status": operation.get("status"),
                "executionArn": operation.get("executionArn"),
                "stateTransitions": transitions,
                "error": operation.get("error"),
            }
        )
        return operation

    def _finished_execution_transitions(self, operation: Mapping[str, Any]) -> int | None:
        """Wait for the operation's execution to end, then count its state transitions."""
        arn = operation.get("executionArn")
        if not arn:
            return None
        sfn = self.aws("stepfunctions")
        self.wait_until(
            f"execution {arn} to finish",
            lambda: True if sfn.describe_execution(executionArn=arn)["status"] != "RUNNING" else None,
            timeout_s=10.0,
            interval_s=0.05,
        )
        return count_state_transitions(sfn, str(arn))


def workflow_label(execution_arn: str) -> str:
    """``CreateClusterStateMachine op-…``: the state machine's logical id and the execution name."""
    parts = execution_arn.split(":")
    machine, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (execution_arn, "")
    found = _STATE_MACHINE.search(machine)
    return f"{found.group(1) if found else machine} {name}".strip()


def seconds_between(earlier: str, later: str) -> float:
    return max((_parse_time(later) - _parse_time(earlier)).total_seconds(), 0.0)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------
@dataclass
class ScenarioResult:
    name: str
    passed: bool
    duration_s: float
    details: dict[str, Any]
    summary: str


def run_scenario(
    scenario_: Scenario, env: DemoEnvironment, timeline: Timeline, shared: dict[str, Any]
) -> ScenarioResult:
    ctx = DemoContext(scenario_, env, timeline, shared)
    timeline.say(f"\n=== {scenario_.name}: {scenario_.summary}")
    before = env.metrics()
    started = time.monotonic()
    passed = False
    try:
        scenario_.run(ctx)
        passed = True
    except ScenarioFailed as failure:
        ctx.details["failure"] = str(failure)
    except Exception as error:  # noqa: BLE001 - a scenario's crash is its failure, the others still run
        ctx.details["failure"] = f"{type(error).__name__}: {error}"
        ctx.details["traceback"] = traceback.format_exc(limit=6)
    duration = time.monotonic() - started
    if not passed:
        ctx.log("FAIL", str(ctx.details["failure"]))
    used = env.metrics().minus(before)
    ctx.details["aws_calls"] = used.aws_calls
    ctx.details["lambda_invocations"] = sum(used.lambda_invocations.values())
    summary = ctx.summary if passed else str(ctx.details["failure"])
    return ScenarioResult(scenario_.name, passed, round(duration, 3), ctx.details, summary)


def run_demo(
    options: DemoOptions,
    *,
    registry: ScenarioRegistry | None = None,
    environment: EnvironmentFactory | None = None,
    out: TextIO | None = None,
) -> int:
    """Run the scenarios, print the timeline and the summary, write the report; 0 when all passed."""
    chosen = (registry or load_scenarios()).select(options.scenarios)  # UnknownScenarioError: usage
    timeline = Timeline(out or sys.stdout)
    results: list[ScenarioResult] = []
    metrics = ControlPlaneMetrics()
    transitions = 0
    environment_error: str | None = None
    timeline.say(f"HyperPod Autopilot demo: {len(chosen)} scenario(s)")
    try:
        with (environment or sandbox_environment)(options) as env:
            timeline.record(
                "demo", "INFO", f"control plane up: {env.description}", duration_s=timeline.elapsed()
            )
            shared: dict[str, Any] = {}
            for item in chosen:
                results.append(run_scenario(item, env, timeline, shared))
            metrics = env.metrics()
            transitions = env.state_transitions()
    except Exception as error:  # noqa: BLE001 - the environment broke: report it, fail what did not run
        environment_error = f"{type(error).__name__}: {error}"
        timeline.record("demo", "FAIL", f"environment failed: {environment_error}")
    ran = {r.name for r in results}
    for item in chosen:
        if item.name not in ran:
            reason = f"not run: {environment_error}"
            results.append(ScenarioResult(item.name, False, 0.0, {"failure": reason}, reason))
    report = build_report(
        results,
        metrics=metrics,
        transitions=transitions,
        options=options,
        wall_time_s=timeline.elapsed(),
        environment_error=environment_error,
    )
    write_report(options.report_path, report)
    print_summary(timeline, results, report, options)
    return 0 if results and all(r.passed for r in results) else 1


def build_report(
    results: Sequence[ScenarioResult],
    *,
    metrics: ControlPlaneMetrics,
    transitions: int,
    options: DemoOptions,
    wall_time_s: float,
    environment_error: str | None,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "scenarios": [
            {"name": r.name, "passed": r.passed, "duration_s": r.duration_s, "details": r.details}
            for r in results
        ],
        "aws_calls": metrics.aws_calls,
        "state_transitions": transitions,
        "lambda_invocations": sum(metrics.lambda_invocations.values()),
        "lambda_invocations_by_function": metrics.lambda_invocations,
        "passed": bool(results) and all(r.passed for r in results),
        "wall_time_s": round(wall_time_s, 3),
        "sandbox": {"speed": options.speed, "parameters": dict(DEMO_RUN_PARAMETERS)},
    }
    if environment_error:
        report["environment_error"] = environment_error
    return report


def write_report(path: Path, report: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")


def summary_table(results: Sequence[ScenarioResult], width: int = 90) -> list[str]:
    rows = []
    for r in results:
        text = r.summary if len(r.summary) <= width else r.summary[: width - 1] + "…"
        rows.append(
            f"{r.name:<{NAME_WIDTH}} {'PASS' if r.passed else 'FAIL':<6} {r.duration_s:>6.2f}s  {text}"
        )
    header = f"{'scenario':<{NAME_WIDTH}} {'result':<6} {'time':>7}  what it showed / why it failed"
    return [header, "-" * max(len(line) for line in [header, *rows]), *rows]


def print_summary(
    timeline: Timeline, results: Sequence[ScenarioResult], report: Mapping[str, Any], options: DemoOptions
) -> None:
    passed = sum(r.passed for r in results)
    timeline.say("")
    for line in summary_table(results):
        timeline.say(line)
    calls = sum(report["aws_calls"].values())
    timeline.say(
        f"\n{passed}/{len(results)} scenarios passed in {report['wall_time_s']:.1f} s: "
        f"{calls} AWS calls by the control plane, {report['state_transitions']} state transitions, "
        f"{report['lambda_invocations']} Lambda invocations"
    )
    timeline.say(f"report: {options.report_path}")
    if not options.verbose:
        timeline.say(f"sandbox log (API access log, workflow errors): {options.sandbox_log}")


# The environment's names too: tests and tools import the demo's parameters and environment from here.
__all__ = [
    "DEFAULT_REPORT",
    "DEFAULT_SPEED",
    "DEMO_PARAMETERS",
    "DEMO_RUN_PARAMETERS",
    "KINDS",
    "MODULE_ORDER",
    "NAME_WIDTH",
    "OPERATION_TIMEOUT_S",
    "POLL_S",
    "REGISTRY",
    "ControlPlaneMetrics",
    "DemoContext",
    "DemoOptions",
    "SandboxEnvironment",
    "Scenario",
    "ScenarioFailed",
    "ScenarioFunction",
    "ScenarioRegistry",
    "ScenarioResult",
    "Timeline",
    "TimelineEntry",
    "UnknownScenarioError",
    "build_report",
    "format_entry",
    "load_scenarios",
    "print_summary",
    "run_demo",
    "run_scenario",
    "sandbox_api_client",
    "scenario",
    "seconds_between",
    "state_entries",
    "summary_table",
    "workflow_label",
    "write_report",
]
