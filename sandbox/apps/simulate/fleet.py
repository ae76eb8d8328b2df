"""The fleet simulation's driver: clusters in the sandbox, failures injected, the clock jumped.

One ``Sandbox`` on the real template runs one cluster per policy side by side on a frozen clock (speed
0), each with the most spares asked for. The job of each spare count K runs on the first ``nodes + K``
workers of its policy's cluster: the control plane repairs a node the same way whatever job runs on
it, so the spare counts share one cluster's repairs (five clusters' worth of control-plane work per
policy would be the same repairs five times; docs/fleet-sim.md says what this leaves out). The
clusters are created through the API (the Create workflow); from then on the driver
only injects HMA faults (``node_unhealthy``, ``reboot_does_not_heal``) and reads the nodes as the
orchestrator on them would (``HyperPodSimulator.node_state``). Everything that repairs a node is the
deployed control plane (HyperPodEventsRule → SQS → ClusterEventsFunction → ReplaceNodeStateMachine,
lease, breaker, HealingSweepFunction on its schedule) or HyperPod's own recovery (NodeRecovery
Automatic, the simulator's). Policies: ``hyperpod`` (NodeRecovery Automatic: HyperPod repairs, Autopilot
observes) and ``autopilot`` (NodeRecovery None: Autopilot reboots or replaces, escalating a reboot that
does not heal to a replace).

The clock moves only when the control plane is quiescent: no Lambda delivery queued or running, no
SQS batch to deliver, every RUNNING Step Functions execution's thread waiting on a timer or a task
token (``stepfunctions_clock.blocked_threads``) with no timer already due, no execution history that
grew since the last look, and no simulator step due. Then it jumps to the next thing scheduled: the
next injected failure, the simulator's next lifecycle step or event delivery, a workflow timer
(``stepfunctions_clock.next_deadline``), a schedule rule, or the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

import botocore.loaders
import botocore.session
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from sandbox.apps.demo.clusters import create_body
from sandbox.apps.demo.runner import DEMO_PARAMETERS, SandboxEnvironment
from sandbox.apps.simulate.failures import REBOOT, Failure, failure_trace
from sandbox.apps.simulate.job import JobSettings, TrainingJob
from sandbox.apps.simulate.repair_kills import JobOnNode, gpus_lost, killed_work_s
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.stepfunctions import clock as stepfunctions_clock
from sandbox.harness.core import Sandbox

POLICIES: Final = {"hyperpod": "Automatic", "autopilot": "None"}
WORKERS: Final = "worker-group-1"
CLOCK_START: Final = datetime(2026, 1, 5, 0, 0, tzinfo=UTC)
# Timer wake-ups: a waiting execution re-reads the frozen clock this often (wall seconds). Shorter
# than the seam's default: every jump of the clock waits for the timers it ended to wake.
POLL_SECONDS: Final = 0.005
# A jump lands this far past its target (float seconds of the clock vs microsecond datetimes).
EPSILON_S: Final = 0.001
QUIESCE_TIMEOUT_S: Final = 300.0


@dataclass(frozen=True)
class SimulationOptions:
    nodes: int = 2048
    # Llama 3's snapshot: ~5 minutes of wall time for both policies (docs/fleet-sim.md, "Scale")
    days: float = 54.0
    spares: tuple[int, ...] = (0, 8, 16, 32, 64)
    policies: tuple[str, ...] = ("hyperpod", "autopilot")
    # Llama 3 publishes neither: these land its 2,048-node no-spare case near ~90 % (docs/fleet-sim.md)
    checkpoint_minutes: float = 5.0
    restart_minutes: float = 3.0
    reboot_minutes: float = 2.0
    replace_minutes: float = 20.0
    rate_scale: float = 1.0
    seed: int = 7
    max_concurrent_repairs: int = 4
    # A Slurm-aware repair's wait for the drained node's jobs (the template's DrainTimeoutMinutes
    # default): the repair-kill accounting of the autopilot policy (repair_kills.py)
    drain_timeout_minutes: float = 60.0
    max_unhealthy_percent: int = 20
    fallback_poll_seconds: int = 300
    # The sweep is the safety net for missed events; the simulation loses none, and each run costs
    # ~0.3 s of wall time (more with thousands of nodes): daily, as make bench runs it.
    sweep_schedule: str = "rate(1 day)"

    def parameters(self) -> dict[str, Any]:
        """Template parameters: the healing ones as given, the unrelated schedules daily (each run is
        real work for the machine, and finds nothing to do in a fleet of one job)."""
        return {
            **DEMO_PARAMETERS,
            "FallbackPollSeconds": self.fallback_poll_seconds,
            "MaxConcurrentRepairs": self.max_concurrent_repairs,
            "MaxUnhealthyPercent": self.max_unhealthy_percent,
            "HealingSweepScheduleExpression": self.sweep_schedule,
            "ReconcileScheduleExpression": "rate(1 day)",
            "CostTagScheduleExpression": "rate(1 day)",
            "SessionGuardScheduleExpression": "rate(1 day)",
            "SpendMeterMinutes": 1440,
        }


@dataclass
class JobRun:
    """The job of one spare count: it runs on its cluster's first ``nodes + spares`` workers."""

    spares: int
    slots: int  # nodes + spares: the workers this job's cluster would have
    job: TrainingJob
    node_faults: int = 0  # faults injected on its workers
    replace_faults: int = 0  # of which HMA asks for a replace (or a reboot will not heal)
    job_faults: int = 0  # job-level failures
    absorbed: int = 0  # faults on a worker already down (not injected again)
    # faults after which a repair, not the fault, ends the job (repair_kills.py), and the job's
    # seconds of work that repair kills under the run's policy
    repair_kills: int = 0
    repair_killed_s: float = 0.0
    # filled at the end from the control plane's records of its workers
    reboots: int = 0
    replacements: int = 0
    repair_executions: int = 0  # ReplaceNode executions
    transitions: int = 0  # their *StateEntered events


@dataclass
class ClusterRun:
    """One policy's cluster: its workers by slot, the slots whose node is down, a job per spare count."""

    policy: str
    name: str
    jobs: list[JobRun]
    slot_nodes: list[str] = field(default_factory=list)
    node_slots: dict[str, int] = field(default_factory=dict)  # every node that held a slot
    down: set[int] = field(default_factory=set)

    @property
    def slots(self) -> int:
        return len(self.slot_nodes)


@dataclass
class Outcome:
    """What a finished simulation hands the report."""

    runs: list[ClusterRun]
    end_s: float
    wall_s: float
    steps: int
    lambda_metrics: dict[str, dict[str, float]]  # function → invocations, duration_ms during the run
    lambda_memory_mb: dict[str, int]


def merge(outcomes: list[Outcome]) -> Outcome:
    """One outcome of simulations run side by side (one per policy, each in its own sandbox): their
    clusters, the longest wall time, and their functions' figures summed."""
    metrics: dict[str, dict[str, float]] = {}
    for outcome in outcomes:
        for name, figures in outcome.lambda_metrics.items():
            mine = metrics.setdefault(name, {})
            for key, value in figures.items():
                mine[key] = mine.get(key, 0.0) + value
    return Outcome(
        runs=[run for outcome in outcomes for run in outcome.runs],
        end_s=max(outcome.end_s for outcome in outcomes),
        wall_s=max(outcome.wall_s for outcome in outcomes),
        steps=sum(outcome.steps for outcome in outcomes),
        lambda_metrics=metrics,
        lambda_memory_mb={k: v for outcome in outcomes for k, v in outcome.lambda_memory_mb.items()},
    )


class Quiescence:
    """Tells when the control plane has nothing in flight (see the module docstring)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.blocked_before = stepfunctions_clock.blocked_threads()
        self._backend = stepfunctions_parser_backends[sandbox.account_id][sandbox.region]
        self._seen: dict[str, int] = {}  # state machine ARN → executions looked at
        self._running: list[Any] = []

    def _executions(self) -> tuple[int, int]:
        """(RUNNING executions, the sum of their history lengths): the second moves with any step."""
        for machine in list(self._backend.state_machines):
            executions = machine.executions
            start = self._seen.get(machine.arn, 0)
            self._running += executions[start:]
            self._seen[machine.arn] = len(executions)
        self._running = [
            e for e in self._running if e.exec_status is None or e.exec_status.value == "RUNNING"
        ]
        events = 0
        for execution in self._running:
            events += len(_history(execution))
        return len(self._running), events

    def wait(self, timeout: float = QUIESCE_TIMEOUT_S) -> None:
        sandbox = self.sandbox
        dispatcher = sandbox.runtime.dispatcher
        deadline = time.monotonic() + timeout
        quiet_rounds, last = 0, (-1, -1)
        while time.monotonic() < deadline:
            idle = dispatcher.wait_idle(max(0.0, deadline - time.monotonic()))
            delivered = sandbox.poller.poll_once()
            due = sandbox.hyperpod.next_due()
            if due is not None and due <= sandbox.clock.now():
                sandbox.tick()
                quiet_rounds = 0
                continue
            running, progress = self._executions()
            timer = stepfunctions_clock.next_deadline()
            quiet = (
                idle
                and not delivered
                and dispatcher.pending() == 0
                and sandbox.poller.in_flight() == 0
                and stepfunctions_clock.blocked_threads() - self.blocked_before >= running
                and (timer is None or timer > sandbox.clock.elapsed())
            )
            if quiet and (running, progress) == last:
                quiet_rounds += 1
                if quiet_rounds >= 2:
                    return
            else:
                quiet_rounds = 0
            last = (running, progress)
            time.sleep(0.001)
        raise TimeoutError(f"the control plane was still busy after {timeout} s of wall time")


class FleetSimulation:
    def __init__(self, options: SimulationOptions, progress: Callable[[str], None] | None = None) -> None:
        self.options = options
        self.steps = 0
        self.progress = progress or (lambda _: None)  # told once per simulated day

    def run(self) -> Outcome:
        with self._environment() as env:
            return self._simulate(env)

    @contextlib.contextmanager
    def _environment(self) -> Iterator[SandboxEnvironment]:
        options = self.options
        original_poll = stepfunctions_clock.POLL_SECONDS
        setattr(stepfunctions_clock, "POLL_SECONDS", POLL_SECONDS)  # noqa: B010 - a Final of the seam
        original_loader = botocore.session.create_loader
        botocore.session.create_loader = _shared_loader
        try:
            with Sandbox(
                parameters=options.parameters(),
                clock=SandboxClock(speed=0, start=CLOCK_START),
                seed=options.seed,
            ) as sandbox:
                sandbox.hyperpod.timings = dataclasses.replace(
                    sandbox.hyperpod.timings,
                    reboot_node=options.reboot_minutes * 60,
                    replace_node=options.replace_minutes * 60,
                )
                yield SandboxEnvironment(sandbox, sandbox.serve_api(0))
        finally:
            botocore.session.create_loader = original_loader
            setattr(stepfunctions_clock, "POLL_SECONDS", original_poll)  # noqa: B010

    def _simulate(self, env: SandboxEnvironment) -> Outcome:
        options, sandbox = self.options, env.sandbox
        quiescence = Quiescence(sandbox)
        runs = self._create_clusters(env, quiescence)
        wall_start = time.perf_counter()
        metrics_before = sandbox.runtime.metrics()
        start_s = sandbox.clock.elapsed()
        seconds = options.days * 86400
        trace = failure_trace(
            nodes=options.nodes,
            slots=options.nodes + max(options.spares),
            seconds=seconds,
            seed=options.seed,
            rate_scale=options.rate_scale,
        )
        pending, day = 0, 0
        self.progress(f"clusters created; {len(trace)} failures to inject")
        while True:
            quiescence.wait()
            now = sandbox.clock.elapsed() - start_s
            if now >= (day + 1) * 86400:
                day = int(now // 86400)
                wall = time.perf_counter() - wall_start
                self.progress(f"day {day}: {pending} failures injected, {self.steps} jumps, {wall:.0f} s")
            for run in runs:
                self._observe(sandbox, run, now)
            if now >= seconds:
                break
            injected = False
            while pending < len(trace) and trace[pending].at_s <= now:
                for run in runs:
                    self._inject(sandbox, run, trace[pending], now)
                pending += 1
                injected = True
            if injected:
                continue
            target = min(
                seconds,
                trace[pending].at_s if pending < len(trace) else seconds,
                *self._scheduled(sandbox, start_s),
            )
            sandbox.clock.advance(max(0.0, target - now) + EPSILON_S)
            sandbox.tick()
            self.steps += 1
        for run in runs:
            for job_run in run.jobs:
                job_run.job.finish(seconds)
        wall_s = time.perf_counter() - wall_start
        _attribute_repairs(sandbox, runs)
        metrics_after = sandbox.runtime.metrics()
        return Outcome(
            runs=runs,
            end_s=seconds,
            wall_s=wall_s,
            steps=self.steps,
            lambda_metrics={
                name: {
                    "invocations": float(m["invocations"])
                    - float(metrics_before.get(name, {}).get("invocations", 0)),
                    "duration_ms": float(m["duration_ms"])
                    - float(metrics_before.get(name, {}).get("duration_ms", 0)),
                }
                for name, m in metrics_after.items()
            },
            lambda_memory_mb={lid: spec.memory_size for lid, spec in sandbox.stack.functions.items()},
        )

    def _scheduled(self, sandbox: Sandbox, start_s: float) -> list[float]:
        """The simulation seconds of the next simulator step, workflow timer and schedule."""
        now_dt, now_s = sandbox.clock.now(), sandbox.clock.elapsed()
        found: list[float] = []
        for due in (sandbox.hyperpod.next_due(), sandbox.next_schedule_due()):
            if due is not None:
                found.append(now_s + (due - now_dt).total_seconds() - start_s)
        timer = stepfunctions_clock.next_deadline()
        if timer is not None:
            found.append(timer - start_s)
        return found

    # ---------------------------------------------------------------- clusters

    def _create_clusters(self, env: SandboxEnvironment, quiescence: Quiescence) -> list[ClusterRun]:
        options, sandbox = self.options, env.sandbox
        settings = JobSettings(options.nodes, options.checkpoint_minutes * 60, options.restart_minutes * 60)
        job_nodes = list(range(options.nodes))
        runs = [
            ClusterRun(
                policy,
                f"sim-{policy}",
                [
                    JobRun(spares, options.nodes + spares, TrainingJob(settings, job_nodes, 0.0))
                    for spares in options.spares
                ],
            )
            for policy in options.policies
        ]
        workers = options.nodes + max(options.spares)
        operations = []
        for run in runs:
            body = create_body(run.name, sandbox.region, budget=False)
            config = body["clusterConfig"]
            config["NodeRecovery"] = POLICIES[run.policy]
            for group in config["InstanceGroups"]:
                if group["InstanceGroupName"] == WORKERS:
                    group["InstanceCount"] = workers
                    # new instances go straight to Running: a replace takes replace_minutes in all
                    group.pop("OnStartDeepHealthChecks", None)
            operations.append(env.api.create_cluster(body)["operationId"])
        while True:
            quiescence.wait()
            statuses = [env.api.get_operation(o)["status"] for o in operations]
            if all(s != "RUNNING" for s in statuses):
                break
            due = [d for d in self._scheduled(sandbox, sandbox.clock.elapsed()) if d > 0]
            sandbox.clock.advance(min(due, default=60.0) + EPSILON_S)
            sandbox.tick()
        if any(s != "SUCCEEDED" for s in statuses):
            raise RuntimeError(f"the simulation's clusters were not all created: {statuses}")
        sagemaker = sandbox.client("sagemaker")
        for run in runs:
            listed: list[tuple[datetime, str]] = []
            for page in sagemaker.get_paginator("list_cluster_nodes").paginate(
                ClusterName=run.name, InstanceGroupNameContains=WORKERS
            ):
                listed += [(n["LaunchTime"], n["InstanceId"]) for n in page["ClusterNodeSummaries"]]
            run.slot_nodes = [instance for _, instance in sorted(listed)]
            run.node_slots = {node: slot for slot, node in enumerate(run.slot_nodes)}
            if run.slots != workers:
                raise RuntimeError(f"{run.name} has {run.slots} workers, {workers} wanted")
        return runs

    # ---------------------------------------------------------------- failures and the job

    def _inject(self, sandbox: Sandbox, run: ClusterRun, failure: Failure, now: float) -> None:
        if failure.slot is None:
            for job_run in run.jobs:
                job_run.job_faults += 1
                job_run.job.interrupt(now)
            return
        mine = [job_run for job_run in run.jobs if failure.slot < job_run.slots]
        if failure.slot in run.down:
            for job_run in mine:
                job_run.absorbed += 1
            return
        node = run.slot_nodes[failure.slot]
        if failure.fault_type == REBOOT and not failure.reboot_heals:
            sandbox.apply_fault("reboot_does_not_heal", {"cluster": run.name, "node_id": node})
        sandbox.apply_fault(
            "node_unhealthy", {"cluster": run.name, "node_id": node, "fault_type": failure.fault_type}
        )
        run.down.add(failure.slot)
        for job_run in mine:
            job_run.node_faults += 1
            job_run.replace_faults += failure.fault_type != REBOOT or not failure.reboot_heals
            if job_run.job.hits(failure.slot):
                self._count_repair_kill(run.policy, job_run, failure, now)
                job_run.job.interrupt(now)

    def _count_repair_kill(self, policy: str, job_run: JobRun, failure: Failure, now: float) -> None:
        """The work a repair of the job's node kills, by the policy's rule (repair_kills.py). The job
        model itself still stops the job at the fault under both policies: these clusters have no Slurm
        agent, so the control plane runs today's repair (docs/fleet-sim.md, "Repair kills")."""
        job = job_run.job
        run_s = job.run_s(now)
        if run_s is None or gpus_lost(failure.fault_type):
            return
        on_node = JobOnNode(run_s, job.settings.checkpoint_s)
        job_run.repair_kills += 1
        job_run.repair_killed_s += killed_work_s(
            policy,
            on_node,
            fault_type=failure.fault_type,
            drain_timeout_s=self.options.drain_timeout_minutes * 60,
        )

    def _observe(self, sandbox: Sandbox, run: ClusterRun, now: float) -> None:
        """Down slots whose node (or its successor) serves again are back; waiting jobs restart."""
        for slot in sorted(run.down):
            state = sandbox.hyperpod.node_state(run.name, run.slot_nodes[slot])
            while state is not None and state.replaced_by is not None:
                run.slot_nodes[slot] = state.replaced_by
                run.node_slots[state.replaced_by] = slot
                state = sandbox.hyperpod.node_state(run.name, state.replaced_by)
            if state is None:
                raise RuntimeError(f"{run.name}: the node of slot {slot} vanished without a successor")
            if state.serves:
                run.down.discard(slot)
        for job_run in run.jobs:
            job_run.job.try_restart(now, set(range(job_run.slots)) - run.down)


def _attribute_repairs(sandbox: Sandbox, runs: list[ClusterRun]) -> None:
    """Each job's share of its cluster's repairs: the reboots, replacements and ReplaceNode executions
    (with their *StateEntered events, the billed transitions) of the workers it can use."""
    by_name = {run.name: run for run in runs}
    for (cluster, node, kind), count in sandbox.hyperpod.node_repairs.items():
        run = by_name.get(cluster)
        if run is None or node not in run.node_slots:
            continue
        for job_run in run.jobs:
            if run.node_slots[node] < job_run.slots:
                if kind == "reboot":
                    job_run.reboots += count
                else:
                    job_run.replacements += count
    backend = stepfunctions_parser_backends[sandbox.account_id][sandbox.region]
    machine_arn = sandbox.stack.resources["ReplaceNodeStateMachine"].arn
    for machine in backend.state_machines:
        if machine.arn != machine_arn:
            continue
        for execution in machine.executions:
            data = execution_input(execution)
            run = by_name.get(str(data.get("clusterName", "")))
            slot = run.node_slots.get(str(data.get("nodeId", ""))) if run else None
            if run is None or slot is None:
                continue
            entered = sum(1 for e in _history(execution) if str(e.get("type", "")).endswith("StateEntered"))
            for job_run in run.jobs:
                if slot < job_run.slots:
                    job_run.repair_executions += 1
                    job_run.transitions += entered


def _progress(terminal: TextIO | None, prefix: str = "") -> Callable[[str], None]:
    """Progress lines on the terminal the run started with (the sandbox's output goes to the log)."""

    def say(line: str) -> None:
        if terminal is not None:
            print(f"  {prefix}{line}", file=terminal, flush=True)

    return say


def run_logged(options: SimulationOptions, log_path: Path, prefix: str = "") -> Outcome:
    """One simulation, the sandbox's output in ``log_path``, progress on the terminal (a function of
    this module, not of ``__main__``: a spawned process runs it by name)."""
    with (
        log_path.open("w", encoding="utf-8") as log,
        contextlib.redirect_stderr(log),
        contextlib.redirect_stdout(log),
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        return FleetSimulation(options, progress=_progress(sys.__stdout__, prefix)).run()


@functools.cache
def _shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """One botocore data loader for every session in the process, so the service models a function
    loads are parsed once, not once per client: each ``boto3.session.Session`` (autopilot.aws makes
    one per client) otherwise reads and parses the service's JSON again, ~0.4 s a client, which was
    the largest share of an in-process invocation (docs/fleet-sim.md, "Scale"). Loaded models are
    only read; sharing them changes what the machine does, not what the control plane does."""
    return botocore.loaders.create_loader(search_path_string)


def execution_input(execution: Any) -> dict[str, Any]:
    """moto keeps an execution's input parsed (``input_data``); a string is parsed here."""
    data = execution.input_data
    return data if isinstance(data, dict) else dict(json.loads(data or "{}"))


def _history(execution: Any) -> list[dict[str, Any]]:
    """The execution's history events as moto keeps them (no copy: this runs at every look)."""
    environment = getattr(execution.exec_worker, "env", None)  # None until the worker started
    events: list[dict[str, Any]] = environment.event_manager._history_event_list if environment else []
    return events
