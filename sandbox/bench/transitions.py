"""State transitions per create and per cleanup operation, measured in the sandbox, and what they cost.

Each operation runs through the HTTP API on the real template (as the demo does); its Step Functions
execution history gives the transitions (*StateEntered events) and how many times the poll loop ran.
A sandbox cluster comes up in a second or two of wall time, so it polls once or twice; in AWS the
workflow polls every ``PollIntervalSeconds`` (template default) for as long as HyperPod takes. The
production estimate therefore adds one poll-loop cycle (its length read from the ASL) per extra
poll: ``measured + (production polls - measured polls) x cycle``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from sandbox.demo.runner import SandboxEnvironment, embedded_environment, state_entries
from sandbox.deploy import load_template
from sandbox.hyperpod.model import HyperPodTimings

ROOT: Final = Path(__file__).resolve().parents[2]
TEMPLATE: Final = ROOT / "template.yaml"
MACHINES: Final = {
    "CreateCluster": ("CreateClusterStateMachine", "Wait For Cluster"),
    "DeleteCluster": ("CleanupClusterStateMachine", "Wait For Deletion"),
}
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
}


@dataclass(frozen=True)
class OperationTransitions:
    kind: str  # CreateCluster | DeleteCluster
    operation_id: str
    transitions: int  # *StateEntered events in the execution
    polls: int  # entries of the poll loop's Wait state
    wall_s: float


@dataclass(frozen=True)
class WorkflowFigures:
    kind: str
    state_machine: str
    measured_transitions: float  # median over the runs
    measured_polls: float
    poll_cycle: int  # transitions one more poll adds (the loop's length in the ASL)
    production_poll_interval_s: int
    production_duration_s: float
    production_polls: int
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
        "poll_interval_s": int(template["Parameters"]["PollIntervalSeconds"]["Default"]),
        "api_memory_mb": int(api_memory),
        "definitions": {
            kind: load_asl(template_path.parent / resources[machine]["Properties"]["DefinitionUri"])
            for kind, (machine, _) in MACHINES.items()
        },
    }


def load_asl(path: Path) -> dict[str, Any]:
    definition: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return definition


def poll_cycle_length(definition: Mapping[str, Any], wait_state: str) -> int:
    """Transitions one poll iteration takes: the shortest path from ``wait_state`` back to itself."""
    states: Mapping[str, Any] = definition["States"]

    def successors(name: str) -> list[str]:
        state = states[name]
        nexts = [state["Next"]] if "Next" in state else []
        nexts += [choice["Next"] for choice in state.get("Choices", []) if "Next" in choice]
        nexts += [state["Default"]] if "Default" in state else []
        return nexts

    frontier, seen, depth = [wait_state], {wait_state}, 0
    while frontier:
        depth += 1
        following: list[str] = []
        for name in frontier:
            for successor in successors(name):
                if successor == wait_state:
                    return depth
                if successor not in seen:
                    seen.add(successor)
                    following.append(successor)
        frontier = following
    raise ValueError(f"{wait_state} is not in a loop")


def run_operations(
    env: SandboxEnvironment, pairs: int, timeout_s: float = 90.0
) -> list[OperationTransitions]:
    """Create and clean up ``pairs`` clusters through the API; transitions of each execution."""
    from sandbox.demo.scenarios_lifecycle import create_body  # noqa: PLC0415 - the demo's workshop config

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
        polls=entered[MACHINES[kind][1]],
        wall_s=round(time.monotonic() - started, 3),
    )


def workflow_figures(
    measured: list[OperationTransitions], settings: Mapping[str, Any]
) -> dict[str, WorkflowFigures]:
    figures: dict[str, WorkflowFigures] = {}
    for kind, (machine, wait_state) in MACHINES.items():
        runs = [m for m in measured if m.kind == kind]
        if not runs:
            continue
        transitions = statistics.median(m.transitions for m in runs)
        polls = statistics.median(m.polls for m in runs)
        cycle = poll_cycle_length(settings["definitions"][kind], wait_state)
        interval = settings["poll_interval_s"]
        production_polls = math.ceil(TYPICAL_SECONDS[kind] / interval)
        figures[kind] = WorkflowFigures(
            kind=kind,
            state_machine=machine,
            measured_transitions=transitions,
            measured_polls=polls,
            poll_cycle=cycle,
            production_poll_interval_s=interval,
            production_duration_s=TYPICAL_SECONDS[kind],
            production_polls=production_polls,
            production_transitions=transitions + (production_polls - polls) * cycle,
        )
    return figures


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
    gb_seconds = requests * math.ceil(lambda_ms_per_request) / 1000 * lambda_memory_mb / 1024
    lines = {
        "step_functions": transitions * PRICES["sfn_transition"].usd,
        "lambda_duration": gb_seconds * PRICES["lambda_gb_s"].usd,
        "lambda_requests": requests * PRICES["lambda_request"].usd,
        "api_gateway": requests * PRICES["apigw_request"].usd,
    }
    return {
        "workload": asdict(workload),
        "state_transitions": transitions,
        "api_requests": requests,
        "lambda_gb_seconds": round(gb_seconds, 3),
        "usd": {key: round(value, 4) for key, value in lines.items()},
        "usd_total": round(sum(lines.values()), 4),
    }


def measure(pairs: int, workload: Workload, *, speed: float, log_path: Path | None) -> dict[str, Any]:
    """Run ``pairs`` create+cleanup operations in a sandbox; transitions, Lambda use, monthly cost."""
    settings = template_settings()
    with embedded_environment(speed=speed, log_path=log_path) as env:
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
