"""Where the demo's scenarios run: the environment they see (AWS clients, faults, the clock, stack
outputs, control-plane metrics), the embedded Sandbox that provides it with the demo's parameters,
clock and duplicates, and the counts of Step Functions state transitions it reports.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

import boto3
from autopilot_cli.client import AutopilotClient
from botocore.credentials import Credentials

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
    from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS  # noqa: PLC0415 - sandbox-only import

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
    from sandbox.emulator.clock import SandboxClock  # noqa: PLC0415 - as below
    from sandbox.harness.core import Sandbox  # noqa: PLC0415 - keeps the runner importable without moto started

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
        sandbox.budgets.duplicate_deliveries = DEMO_DUPLICATES
        yield SandboxEnvironment(sandbox, sandbox.serve_api(0))
