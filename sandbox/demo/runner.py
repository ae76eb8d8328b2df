"""The demo runner: a scenario registry, a timeline a person can follow, a summary table, a report.

A scenario is a function of a ``DemoContext``, registered with one decorator:

    @scenario("create_cluster", "POST /clusters -> SUCCEEDED, InService, tagged, budget, event")
    def create_cluster(ctx: DemoContext) -> None:
        accepted = ctx.call("POST /clusters", lambda: ctx.api.create_cluster(body))
        operation = ctx.wait_for_operation(accepted["operationId"])
        ctx.check(operation["status"] == "SUCCEEDED", "operation SUCCEEDED", str(operation.get("error")))

Every module ``sandbox/demo/scenarios_*.py`` is imported by ``load_scenarios()``, so a capability
adds its scenarios by adding such a module; nothing here changes. Scenarios reach the control plane
through public surfaces only: the HTTP API (``ctx.api``, SigV4-signed), AWS APIs (``ctx.aws``, to
observe what the control plane did) and the simulators' fault injection (``ctx.fault``).

The report (``build/demo-report.json``)::

    {"scenarios": [{"name", "passed", "duration_s", "details"}],
     "aws_calls": {"<service>:<Operation>": count},   # the control plane's calls, not the demo's checks
     "state_transitions": N,                          # *StateEntered events over every execution
     "lambda_invocations": N, ...}
"""

from __future__ import annotations

import contextlib
import importlib
import json
import pkgutil
import re
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol, TextIO, TypeVar

import boto3
from autopilot_cli.client import ApiError, AutopilotClient
from botocore.credentials import Credentials

T = TypeVar("T")
ScenarioFunction = Callable[["DemoContext"], None]

DEFAULT_REPORT: Final = Path("build") / "demo-report.json"
DEFAULT_SPEED: Final = 1200.0
# Template parameters for the demo: let a stuck workflow fail on its own within the demo's time
# (simulated seconds: HyperPod creates in 20 min, deletes in 5), not after the production 2 h / 1 h.
# The template's own deadlines (Create 7200 s, Delete 3600 s): the sandbox clock runs on while a busy
# machine starves the control plane of CPU, so a deadline near the simulated create time would turn
# load into failures that AWS would not give.
# The demo's and tests' sample requests name a lifecycle bucket, subnets and a security group that exist
# in no account: CallerResourceChecks (on by default) would refuse them (docs/security.md).
DEMO_PARAMETERS: Final[Mapping[str, Any]] = {"LogLevel": "WARNING", "CallerResourceChecks": "Disabled"}
# The demo's own run adds: the sweeps on an hourly schedule. At x1200 a 5-minute schedule fires four
# times a wall second and each run finds nothing the events did not already handle: on a 2-core
# machine those runs starve the workflows the scenarios follow. Every sweep still runs (hourly is 3 s).
DEMO_RUN_PARAMETERS: Final[Mapping[str, Any]] = {
    **DEMO_PARAMETERS,
    "ReconcileScheduleExpression": "rate(1 hour)",
    "HealingSweepScheduleExpression": "rate(1 hour)",
    "SessionGuardScheduleExpression": "rate(1 hour)",
    "SpendMeterMinutes": 60,
    # department_chargeback replaces a login node (behind its load balancer); no other scenario faults one
    "AllowLoginReplace": "true",
}
# Early in a month: the simulated days the demo covers (x1200 for a few minutes, plus budget_alert's
# steps) stay within one budget period. The machine's own month: real Slurm's jobs carry the machine's
# clock (department_chargeback reads their month's usage beside the spend meter's, on this clock).
_NOW: Final = datetime.now(UTC)
DEMO_CLOCK_START: Final = datetime(_NOW.year, _NOW.month, 2, 6, 0, tzinfo=UTC)
# EventBridge delivers at least once, AWS Budgets now and then notifies a crossing twice: in the demo
# every HyperPod event and every Budgets SNS notification comes twice.
DEMO_DUPLICATES: Final = 1.0
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
    """Import every ``sandbox.demo.scenarios_*`` module (MODULE_ORDER first, then by name)."""
    # This module's folder is the package's (importing sandbox.demo here would import its importer back).
    here = [str(Path(__file__).parent)]
    found = sorted(info.name for info in pkgutil.iter_modules(here) if info.name.startswith("scenarios_"))
    first = [name for name in MODULE_ORDER if name in found]
    for name in [*first, *(n for n in found if n not in first)]:
        importlib.import_module(f"sandbox.demo.{name}")
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
# environment: where the scenarios run
# --------------------------------------------------------------------------------------------------
@dataclass
class ControlPlaneMetrics:
    aws_calls: dict[str, int] = field(default_factory=dict)
    lambda_invocations: dict[str, int] = field(default_factory=dict)

    def minus(self, earlier: ControlPlaneMetrics) -> ControlPlaneMetrics:
        return ControlPlaneMetrics(
            _counter_delta(self.aws_calls, earlier.aws_calls),
            _counter_delta(self.lambda_invocations, earlier.lambda_invocations),
        )


def _counter_delta(later: Mapping[str, int], earlier: Mapping[str, int]) -> dict[str, int]:
    delta = Counter(later)
    delta.subtract(Counter(earlier))
    return {key: count for key, count in sorted(delta.items()) if count > 0}


class DemoEnvironment(Protocol):
    """What a scenario can reach. ``SandboxEnvironment`` is the real one; tests bring fakes."""

    description: str
    api: AutopilotClient

    def aws(self, service: str) -> Any:
        """A boto3 client for observing AWS (its calls are not counted as the control plane's)."""

    def apply_fault(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]: ...

    def advance_clock(self, seconds: float) -> None:
        """Move the sandbox clock ahead (hours of simulated time in a moment)."""

    def stack_output(self, name: str) -> str: ...

    def slurm(self, cluster: str) -> dict[str, Any] | None:
        """The sandbox's real Slurm of a cluster (``GET /_sandbox/slurm/{cluster}``: slurmConf, nodes by
        instance id), None when the cluster has none."""

    def metrics(self) -> ControlPlaneMetrics: ...

    def state_transitions(self) -> int: ...


@dataclass(frozen=True)
class DemoOptions:
    scenarios: tuple[str, ...] = ()
    report_path: Path = DEFAULT_REPORT
    speed: float = DEFAULT_SPEED
    verbose: bool = False  # leave the sandbox's own logs (API access log, moto) on stderr

    @property
    def sandbox_log(self) -> Path:
        return self.report_path.with_name("demo-sandbox.log")


EnvironmentFactory = Callable[[DemoOptions], contextlib.AbstractContextManager[DemoEnvironment]]


def count_state_transitions(sfn: Any, execution_arn: str) -> int:
    """*StateEntered events in the execution's history (what Standard workflows bill, near enough)."""
    return sum(state_entries(sfn, execution_arn).values())


def state_entries(sfn: Any, execution_arn: str) -> Counter[str]:
    """How many times each state was entered, from GetExecutionHistory (all pages)."""
    entered: Counter[str] = Counter()
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        for event in page["events"]:
            if event["type"].endswith("StateEntered"):
                entered[event.get("stateEnteredEventDetails", {}).get("name", "?")] += 1
        token = page.get("nextToken")
        if not token:
            return entered
        kwargs["nextToken"] = token


def all_executions(sfn: Any) -> Iterator[dict[str, Any]]:
    for page in sfn.get_paginator("list_state_machines").paginate():
        for machine in page["stateMachines"]:
            for executions in sfn.get_paginator("list_executions").paginate(
                stateMachineArn=machine["stateMachineArn"]
            ):
                yield from executions["executions"]


def sandbox_api_client(sandbox: Any, api_url: str) -> AutopilotClient:
    """The Autopilot HTTP client for a Sandbox's API, signing with the sandbox's credentials (SigV4)."""
    from sandbox.lambda_runtime import SANDBOX_CREDENTIALS  # noqa: PLC0415 - sandbox-only import

    return AutopilotClient(
        api_url,
        region=sandbox.region,
        credentials=Credentials(
            SANDBOX_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            SANDBOX_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            SANDBOX_CREDENTIALS["AWS_SESSION_TOKEN"],
        ),
    )


class SandboxEnvironment:
    """The control plane deployed from template.yaml into an embedded Sandbox, its API served locally."""

    def __init__(self, sandbox: Any, api_url: str) -> None:
        self.sandbox = sandbox
        self.api_url = api_url
        self.api = sandbox_api_client(sandbox, api_url)
        self.description = (
            f"stack {sandbox.stack.name} in {sandbox.region}, clock x{sandbox.clock.speed:g}, "
            f"API {api_url} (SigV4)"
        )
        self._observer_calls: Counter[str] = Counter()
        self._session: boto3.Session = sandbox.session()
        self._session._session.register("before-call", self._count_observer_call)
        self._clients: dict[str, Any] = {}

    def _count_observer_call(self, model: Any = None, **_: Any) -> None:
        if model is not None:
            self._observer_calls[f"{model.service_model.service_name}:{model.name}"] += 1

    def aws(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(service)  # type: ignore[call-overload]
        return self._clients[service]

    def apply_fault(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The sandbox's fault injection (``POST /_sandbox/faults``): AWS call faults or HyperPod's."""
        result: dict[str, Any] = self.sandbox.apply_fault(name, dict(params))
        return result

    def advance_clock(self, seconds: float) -> None:
        """``POST /_sandbox/clock {"advance": seconds}``: the clock jumps, then keeps running."""
        self.sandbox.admin("POST", "/_sandbox/clock", {"advance": seconds})

    def stack_output(self, name: str) -> str:
        return str(self.sandbox.stack.outputs[name])

    def slurm(self, cluster: str) -> dict[str, Any] | None:
        status, view = self.sandbox.admin("GET", f"/_sandbox/slurm/{cluster}", None)
        return dict(view) if status == 200 else None

    def metrics(self) -> ControlPlaneMetrics:
        """AWS calls since deploy minus the demo's own observing calls; Lambda invocations per function."""
        raw = self.sandbox.metrics()
        return ControlPlaneMetrics(
            aws_calls=_counter_delta(raw["aws_calls"], self._observer_calls),
            lambda_invocations={
                name: int(m["invocations"]) for name, m in sorted(raw["invocations"].items())
            },
        )

    def state_transitions(self) -> int:
        sfn = self.aws("stepfunctions")
        return sum(count_state_transitions(sfn, e["executionArn"]) for e in all_executions(sfn))


def sandbox_environment(options: DemoOptions) -> contextlib.AbstractContextManager[SandboxEnvironment]:
    """The demo's environment: see ``embedded_environment``."""
    return embedded_environment(
        speed=options.speed, log_path=None if options.verbose else options.sandbox_log
    )


@contextlib.contextmanager
def embedded_environment(*, speed: float, log_path: Path | None) -> Iterator[SandboxEnvironment]:
    """Start a Sandbox on the real template.yaml with the demo's parameters, serve its API, yield.

    ``log_path``: where the sandbox's own chatter on stderr goes (API access log, moto's workflow
    error log); None leaves it on stderr.
    """
    from sandbox.clock import SandboxClock  # noqa: PLC0415 - as below
    from sandbox.core import Sandbox  # noqa: PLC0415 - keeps the runner importable without moto started

    with contextlib.ExitStack() as stack:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = stack.enter_context(log_path.open("w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stderr(log))
            # The functions' metrics (EMF lines) go to stdout, as Lambda's do: the timeline holds
            # the terminal it was given before this.
            stack.enter_context(contextlib.redirect_stdout(log))
        stack.enter_context(warnings.catch_warnings())
        # Powertools warns on every invocation whose handler published no metric: noise here.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        sandbox = stack.enter_context(
            Sandbox(
                parameters=DEMO_RUN_PARAMETERS,
                clock=SandboxClock(speed=speed, start=DEMO_CLOCK_START),
                duplicate_events=DEMO_DUPLICATES,
                slurm=True,  # real Slurm for the Slurm clusters (make demo installs it: make slurm)
            )
        )
        if sandbox.budgets is not None:
            sandbox.budgets.duplicate_deliveries = DEMO_DUPLICATES
        yield SandboxEnvironment(sandbox, sandbox.serve_api(0))


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
