"""State transitions per create and per cleanup operation, the event-to-step latency, and the cost.

Each operation runs through the HTTP API on the real template (as the demo does). Its Step Functions
execution history gives the transitions (*StateEntered events) and, for a create, how long the workflow
took from HyperPod's InService event to its next step ("Tag Cluster"): the event's own time is the
version the registry keeps (ClusterEventsFunction records it), both on the sandbox clock.

The workflows wait for HyperPod's state change (a task token), with a DescribeCluster check every
``FallbackPollSeconds``. The sandbox runs with a fallback longer than any operation, so every wait
ends on its event; the AWS estimate adds what the template default adds over a typical create (20 min,
ended by the InService event) or cleanup (5 min; HyperPod sends no event when a cluster is gone, so the
first check after that ends it): ``transitions outside the wait + fallback cycles x cycle length + the
final answer``.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from sandbox.apps.demo.runner import DEMO_PARAMETERS, SandboxEnvironment, state_entries
from sandbox.emulator.deploy import load_template
from sandbox.services.hyperpod.model import HyperPodTimings

ROOT: Final = Path(__file__).resolve().parents[3]
TEMPLATE: Final = ROOT / "template.yaml"
MACHINES: Final = {
    "CreateCluster": "CreateClusterStateMachine",
    "DeleteCluster": "CleanupClusterStateMachine",
}
# The wait both workflows share: Await Cluster (task token) → Cluster Reached, and after a timeout
# Await Cluster → Check Cluster (DescribeCluster) → Cluster Reached → Await Cluster again.
WAIT_STATES: Final = ("Await Cluster", "Check Cluster", "Cluster Reached")
FALLBACK_CYCLE: Final = 3  # Await Cluster, Check Cluster, Cluster Reached
ANSWERED_WAIT: Final = 2  # Await Cluster answered by the event, Cluster Reached
# Whether HyperPod's events end the wait (a create's InService) or only a check does (a cluster gone).
ENDED_BY_EVENT: Final = {"CreateCluster": True, "DeleteCluster": False}
STEP_AFTER_IN_SERVICE: Final = "Tag Cluster"
# Longer than any sandbox operation: the sandbox's waits end on events, never on the fallback.
BENCH_PARAMETERS: Final = {**DEMO_PARAMETERS, "FallbackPollSeconds": 3600}
# How long HyperPod takes in AWS (the simulator's defaults, "what AWS typically shows").
TYPICAL_SECONDS: Final = {
    "CreateCluster": HyperPodTimings().create_cluster,
    "DeleteCluster": HyperPodTimings().delete_cluster,
}


@dataclass(frozen=True)
class Price:
    item: str
    usd: float
    per: str
    source: str


# AWS list prices, us-east-1, as published (checked for this benchmark; free tiers left out).
PRICES: Final = {
    "sfn_transition": Price(
        "Step Functions Standard, state transition",
        0.025 / 1000,
        "transition ($0.025 per 1,000)",
        "https://aws.amazon.com/step-functions/pricing/",
    ),
    "lambda_gb_s": Price(
        "Lambda duration, arm64",
        0.0000133334,
        "GB-second",
        "https://aws.amazon.com/lambda/pricing/",
    ),
    "lambda_request": Price(
        "Lambda requests",
        0.20 / 1_000_000,
        "request ($0.20 per 1M)",
        "https://aws.amazon.com/lambda/pricing/",
    ),
    "apigw_request": Price(
        "API Gateway REST API requests",
        3.50 / 1_000_000,
        "request ($3.50 per million, first 333 M)",
        "https://aws.amazon.com/api-gateway/pricing/",
    ),
    "sqs_request": Price(
        "SQS standard queue requests",
        0.40 / 1_000_000,
        "request ($0.40 per million, 64 KB chunks)",
        "https://aws.amazon.com/sqs/pricing/",
    ),
}
# SQS requests per cluster-events message: SendMessage (EventBridge or the workflow), the poller's
# ReceiveMessage share and DeleteMessage. ClusterEventsFunction runs once per message (batch of 1 at
# this rate), for ~100 ms at the template's memory.
SQS_REQUESTS_PER_MESSAGE: Final = 3
EVENTS_FUNCTION_MS: Final = 100.0
# HyperPod state changes a cluster's life sends (Creating, InService, Deleting), each possibly twice.
STATE_CHANGES_PER_CLUSTER: Final = 6


@dataclass(frozen=True)
class OperationTransitions:
    kind: str  # CreateCluster | DeleteCluster
    operation_id: str
    transitions: int  # *StateEntered events in the execution
    outside_wait: int  # of which outside the shared wait states
    fallback_checks: int  # entries of Check Cluster (0 when the events ended every wait)
    event_to_step_s: float | None  # create: InService event → Tag Cluster entered, simulated seconds
    wall_s: float


@dataclass(frozen=True)
class WorkflowFigures:
    kind: str
    state_machine: str
    measured_transitions: float  # median over the runs, in the sandbox
    outside_wait: float  # median transitions outside the wait
    fallback_poll_s: int  # the template default
    production_duration_s: float
    production_fallback_checks: int
    production_transitions: float


@dataclass(frozen=True)
class Workload:
    clusters_per_month: int
    api_requests_per_cluster: int  # POST + DELETE + status reads by people and tools


def template_settings(template_path: Path = TEMPLATE) -> dict[str, Any]:
    template = load_template(template_path)
    resources = template["Resources"]
    memory = template.get("Globals", {}).get("Function", {}).get("MemorySize", 128)
    api_memory = resources["ApiFunction"]["Properties"].get("MemorySize", memory)
    return {
        "fallback_poll_s": int(template["Parameters"]["FallbackPollSeconds"]["Default"]),
        "api_memory_mb": int(api_memory),
        "definitions": {
            kind: load_asl(template_path.parent / resources[machine]["Properties"]["DefinitionUri"])
            for kind, machine in MACHINES.items()
        },
    }


def load_asl(path: Path) -> dict[str, Any]:
    definition: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return definition


def run_operations(
    env: SandboxEnvironment, pairs: int, timeout_s: float = 90.0
) -> list[OperationTransitions]:
    """Create and clean up ``pairs`` clusters through the API; transitions of each execution."""
    from sandbox.apps.demo.clusters import create_body  # noqa: PLC0415 - the demo's workshop config

    sfn = env.aws("stepfunctions")
    measured: list[OperationTransitions] = []
    for index in range(pairs):
        name = f"bench-{index + 1}"
        created = env.api.create_cluster(create_body(name, env.api.region))
        measured.append(_follow(env, sfn, "CreateCluster", str(created["operationId"]), timeout_s))
        deleted = env.api.delete_cluster(name)
        measured.append(_follow(env, sfn, "DeleteCluster", str(deleted["operationId"]), timeout_s))
    return measured


def _follow(
    env: SandboxEnvironment, sfn: Any, kind: str, operation_id: str, timeout_s: float
) -> OperationTransitions:
    """Wait for the operation and its execution to end; count the execution's transitions and polls."""
    started = time.monotonic()
    operation = env.api.wait_for_operation(operation_id, timeout_seconds=timeout_s, poll_seconds=0.2)
    if operation["status"] != "SUCCEEDED":
        raise RuntimeError(f"{kind} {operation_id} ended {operation['status']}: {operation.get('error')}")
    arn = str(operation["executionArn"])
    deadline = time.monotonic() + 10
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        if time.monotonic() > deadline:
            raise RuntimeError(f"execution {arn} still RUNNING 10 s after its operation ended")
        time.sleep(0.05)
    entered = state_entries(sfn, arn)
    return OperationTransitions(
        kind=kind,
        operation_id=operation_id,
        transitions=sum(entered.values()),
        outside_wait=sum(n for state, n in entered.items() if state not in WAIT_STATES),
        fallback_checks=entered["Check Cluster"],
        event_to_step_s=_event_to_step(env, sfn, arn) if kind == "CreateCluster" else None,
        wall_s=round(time.monotonic() - started, 3),
    )


def _event_to_step(env: SandboxEnvironment, sfn: Any, execution_arn: str) -> float | None:
    """Simulated seconds from the InService event's time to the workflow entering its next step."""
    name = json.loads(sfn.describe_execution(executionArn=execution_arn)["input"])["clusterName"]
    item = env.aws("dynamodb").get_item(
        TableName=env.sandbox.stack.physical_id("StateTable"),
        Key={"pk": {"S": f"CLUSTER#{name}"}, "sk": {"S": f"CLUSTER#{name}"}},
    )["Item"]
    event_time = datetime.fromisoformat(item["sagemakerStatusVersion"]["S"].split("#")[0])
    history = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    entered = [
        e["timestamp"]
        for e in history
        if e.get("stateEnteredEventDetails", {}).get("name") == STEP_AFTER_IN_SERVICE
    ]
    return round((entered[0] - event_time).total_seconds(), 3) if entered else None


def workflow_figures(
    measured: list[OperationTransitions], settings: Mapping[str, Any]
) -> dict[str, WorkflowFigures]:
    figures: dict[str, WorkflowFigures] = {}
    for kind, machine in MACHINES.items():
        runs = [m for m in measured if m.kind == kind]
        if not runs:
            continue
        fallback = settings["fallback_poll_s"]
        duration = TYPICAL_SECONDS[kind]
        outside = statistics.median(m.outside_wait for m in runs)
        if ENDED_BY_EVENT[kind]:
            checks = math.floor(duration / fallback)  # each timeout before the event
            wait = checks * FALLBACK_CYCLE + ANSWERED_WAIT
        else:
            checks = math.ceil(duration / fallback)  # the first check after the cluster is gone ends it
            wait = checks * FALLBACK_CYCLE
        figures[kind] = WorkflowFigures(
            kind=kind,
            state_machine=machine,
            measured_transitions=statistics.median(m.transitions for m in runs),
            outside_wait=outside,
            fallback_poll_s=fallback,
            production_duration_s=duration,
            production_fallback_checks=checks,
            production_transitions=outside + wait,
        )
    return figures


def latency(measured: list[OperationTransitions], speed: float) -> dict[str, Any]:
    """InService event → next step, p50 / p99 (nearest rank), in simulated seconds and wall ms."""
    samples = sorted(m.event_to_step_s for m in measured if m.event_to_step_s is not None)
    if not samples:
        return {"samples": 0}

    def rank(p: float) -> float:
        return samples[max(0, math.ceil(p * len(samples)) - 1)]

    return {
        "samples": len(samples),
        "p50_simulated_s": rank(0.50),
        "p99_simulated_s": rank(0.99),
        "p50_wall_ms": round(rank(0.50) / speed * 1000, 1),
        "p99_wall_ms": round(rank(0.99) / speed * 1000, 1),
        "clock_speed": speed,
    }


def monthly_cost(
    figures: Mapping[str, WorkflowFigures],
    workload: Workload,
    *,
    lambda_ms_per_request: float,
    lambda_memory_mb: int,
) -> dict[str, Any]:
    """What the workload costs a month at list prices (Step Functions, Lambda, API Gateway)."""
    clusters = workload.clusters_per_month
    transitions = clusters * sum(f.production_transitions for f in figures.values())
    requests = clusters * workload.api_requests_per_cluster
    # cluster-events messages: HyperPod's state changes, and one wait request per Await Cluster entry
    waits = sum(f.production_fallback_checks + 1 for f in figures.values())
    messages = clusters * (STATE_CHANGES_PER_CLUSTER + waits)
    invocations = requests + messages
    gb_seconds = (
        (requests * math.ceil(lambda_ms_per_request) + messages * EVENTS_FUNCTION_MS)
        / 1000
        * lambda_memory_mb
        / 1024
    )
    lines = {
        "step_functions": transitions * PRICES["sfn_transition"].usd,
        "lambda_duration": gb_seconds * PRICES["lambda_gb_s"].usd,
        "lambda_requests": invocations * PRICES["lambda_request"].usd,
        "api_gateway": requests * PRICES["apigw_request"].usd,
        "sqs": messages * SQS_REQUESTS_PER_MESSAGE * PRICES["sqs_request"].usd,
    }
    return {
        "workload": asdict(workload),
        "state_transitions": transitions,
        "api_requests": requests,
        "cluster_event_messages": messages,
        "lambda_invocations": invocations,
        "lambda_gb_seconds": round(gb_seconds, 3),
        "usd": {key: round(value, 4) for key, value in lines.items()},
        "usd_total": round(sum(lines.values()), 4),
    }


@contextlib.contextmanager
def bench_environment(*, speed: float, log_path: Path | None) -> Iterator[SandboxEnvironment]:
    """The demo's sandbox (real template.yaml, API served locally) with BENCH_PARAMETERS."""
    from sandbox.harness.core import Sandbox  # noqa: PLC0415 - keeps the module importable without moto started

    with contextlib.ExitStack() as stack:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            stack.enter_context(contextlib.redirect_stderr(stack.enter_context(log_path.open("w"))))
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        sandbox = stack.enter_context(Sandbox(parameters=BENCH_PARAMETERS, speed=speed))
        yield SandboxEnvironment(sandbox, sandbox.serve_api(0))


def measure(pairs: int, workload: Workload, *, speed: float, log_path: Path | None) -> dict[str, Any]:
    """Run ``pairs`` create+cleanup operations in a sandbox; transitions, latency, Lambda use, cost."""
    settings = template_settings()
    with bench_environment(speed=speed, log_path=log_path) as env:
        list(env.api.list_clusters())  # the ApiFunction's cold start, kept out of the per-request time
        before = env.sandbox.metrics()["invocations"].get("ApiFunction", {})
        measured = run_operations(env, pairs)
        after = env.sandbox.metrics()["invocations"].get("ApiFunction", {})
    requests = after.get("invocations", 0) - before.get("invocations", 0)
    duration = after.get("duration_ms", 0.0) - before.get("duration_ms", 0.0)
    ms_per_request = duration / requests if requests else 0.0
    figures = workflow_figures(measured, settings)
    return {
        "operations": [asdict(m) for m in measured],
        "workflows": {kind: asdict(f) for kind, f in figures.items()},
        "event_to_next_step": latency(measured, speed),
        "lambda": {
            "api_ms_per_request_warm": round(ms_per_request, 2),
            "api_memory_mb": settings["api_memory_mb"],
        },
        "monthly_cost": monthly_cost(
            figures,
            workload,
            lambda_ms_per_request=ms_per_request,
            lambda_memory_mb=settings["api_memory_mb"],
        ),
        "prices": {key: asdict(price) for key, price in PRICES.items()},
    }
