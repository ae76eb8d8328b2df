"""The fleet simulation's report: build/fleet-sim.json, a printed table, the ETTR-vs-spares chart.

Costs, at list price (us-east-1):
- ``spare_cost_usd``: the spares' instance hours over the simulated days
  (sandbox/services/pricing/list_prices.py, the SageMaker HyperPod on-demand rate the Budgets simulator uses);
  ``spare_cost_usd_per_month`` the same
  for 730 hours.
- ``control_plane_cost_usd``: Step Functions transitions (the *StateEntered events of the cluster's
  ReplaceNode executions, counted exactly) plus Lambda requests and GB-seconds and the SQS requests of
  the events path, priced as ``make bench`` prices them (sandbox/apps/bench/transitions.py). Lambda figures
  are the run's in-process invocations and wall durations; the event-driven functions
  (ClusterEventsFunction, RecordOutcomeFunction) are shared out by ReplaceNode executions (each
  spare count's job takes those of its workers), the scheduled ones (sweep, reconciler, ...) evenly
  between the policies' clusters: they serve every cluster at once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from sandbox.apps.bench.transitions import PRICES, SQS_REQUESTS_PER_MESSAGE
from sandbox.apps.simulate.failures import CAUSES, LLAMA3_DAYS, LLAMA3_NODES
from sandbox.apps.simulate.fleet import ClusterRun, Outcome, SimulationOptions
from sandbox.services.pricing.list_prices import price_per_hour

INSTANCE_TYPE: Final = "ml.p5.48xlarge"  # the workshop's worker type: 8 H100 GPUs
GPUS_PER_NODE: Final = 8
HOURS_PER_MONTH: Final = 730
EVENT_DRIVEN: Final = ("ClusterEventsFunction", "RecordOutcomeFunction")


def entries(outcome: Outcome, options: SimulationOptions) -> list[dict[str, Any]]:
    hours = outcome.end_s / 3600
    rate = float(price_per_hour(INSTANCE_TYPE))
    event_driven, scheduled = _lambda_usd_per_cluster(outcome)
    rows = []
    for run in outcome.runs:
        executions = cluster_executions(run) or 1
        for job_run in run.jobs:
            job = job_run.job
            lost_s = outcome.end_s - job.trained_s
            lambda_usd = event_driven[run.name] * job_run.repair_executions / executions + scheduled[run.name]
            rows.append(
                {
                    "policy": run.policy,
                    "spares": job_run.spares,
                    "nodes": options.nodes,
                    "gpus": options.nodes * GPUS_PER_NODE,
                    "days": options.days,
                    "ettr": round(job.ettr(outcome.end_s), 5),
                    "lost_gpu_hours": round(lost_s / 3600 * options.nodes * GPUS_PER_NODE, 1),
                    "lost_work_gpu_hours": round(job.lost_s / 3600 * options.nodes * GPUS_PER_NODE, 1),
                    "repair_kills": job_run.repair_kills,
                    "repair_killed_gpu_hours": round(
                        job_run.repair_killed_s / 3600 * options.nodes * GPUS_PER_NODE, 1
                    ),
                    "interruptions": job.interruptions,
                    "reboots": job_run.reboots,
                    "replacements": job_run.replacements,
                    "node_faults": job_run.node_faults,
                    "replace_faults": job_run.replace_faults,
                    "job_faults": job_run.job_faults,
                    "faults_on_down_nodes": job_run.absorbed,
                    "repair_executions": job_run.repair_executions,
                    "transitions": job_run.transitions,
                    "spare_cost_usd": round(job_run.spares * rate * hours, 2),
                    "spare_cost_usd_per_month": round(job_run.spares * rate * HOURS_PER_MONTH, 2),
                    "control_plane_cost_usd": round(
                        job_run.transitions * PRICES["sfn_transition"].usd + lambda_usd, 4
                    ),
                    "loss_per_interruption_min": round(lost_s / job.interruptions / 60, 2)
                    if job.interruptions
                    else None,
                    "wall_s": round(outcome.wall_s, 1),
                }
            )
    return rows


def at_llama3_scale(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each entry's measured loss per interruption at Llama 3's interruption rate (419 in 54 days on
    2,048 nodes): an extrapolation for runs too small or short to reach that scale in the sandbox.
    It holds while the spares cover the nodes down at once, which the smaller run sees less often."""
    seconds = LLAMA3_DAYS * 86400
    unexpected = sum(c.interruptions for c in CAUSES)
    found = []
    for r in rows:
        if r["loss_per_interruption_min"] is None:
            continue
        ettr = 1 - unexpected * r["loss_per_interruption_min"] * 60 / seconds
        found.append(
            {
                "policy": r["policy"],
                "spares": r["spares"],
                "nodes": LLAMA3_NODES,
                "days": LLAMA3_DAYS,
                "ettr_extrapolated": round(ettr, 4),
                "spare_cost_usd_per_month": round(
                    r["spares"] * float(price_per_hour(INSTANCE_TYPE)) * HOURS_PER_MONTH, 2
                ),
            }
        )
    return found


def cluster_executions(run: ClusterRun) -> int:
    """The cluster's ReplaceNode executions: those of the job with the most spares (all its workers)."""
    return max((j.repair_executions for j in run.jobs), default=0)


def _lambda_usd_per_cluster(outcome: Outcome) -> tuple[dict[str, float], dict[str, float]]:
    """Per cluster: the event-driven functions' cost shared out by its ReplaceNode executions, and
    the scheduled ones' cost shared evenly (they serve every cluster at once)."""
    runs = outcome.runs
    executions = {run.name: cluster_executions(run) for run in runs}
    total_executions = sum(executions.values())
    event_driven: dict[str, float] = dict.fromkeys(executions, 0.0)
    scheduled: dict[str, float] = dict.fromkeys(executions, 0.0)
    for function, metrics in outcome.lambda_metrics.items():
        invocations = metrics["invocations"]
        gb_s = metrics["duration_ms"] / 1000 * outcome.lambda_memory_mb.get(function, 128) / 1024
        usd = invocations * PRICES["lambda_request"].usd + gb_s * PRICES["lambda_gb_s"].usd
        if function == "ClusterEventsFunction":  # each of its SQS messages: send, receive, delete
            usd += invocations * SQS_REQUESTS_PER_MESSAGE * PRICES["sqs_request"].usd
        for run in runs:
            if function in EVENT_DRIVEN and total_executions:
                event_driven[run.name] += usd * executions[run.name] / total_executions
            else:
                scheduled[run.name] += usd / len(runs)
    return event_driven, scheduled


def write_json(path: Path, rows: list[dict[str, Any]], outcome: Outcome, options: SimulationOptions) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(options).items()},
        "instance_type": INSTANCE_TYPE,
        "wall_s": round(outcome.wall_s, 1),
        "clock_jumps": outcome.steps,
        "lambda": {
            name: {k: round(v, 1) for k, v in m.items()}
            for name, m in outcome.lambda_metrics.items()
            if m["invocations"]
        },
        "entries": rows,
        "extrapolated_to_llama3_scale": at_llama3_scale(rows),
    }
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def table(rows: Sequence[dict[str, Any]]) -> str:
    header = (
        f"{'policy':<10} {'spares':>6} {'ETTR':>7} {'lost GPU-h':>11} {'repair-killed GPU-h':>19} "
        f"{'interrupts':>10} {'reboots':>7} {'replaces':>8} {'spares $/month':>15} {'control plane $':>15}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['policy']:<10} {r['spares']:>6} {r['ettr'] * 100:>6.2f}% {r['lost_gpu_hours']:>11,.0f} "
            f"{r['repair_killed_gpu_hours']:>19,.0f} {r['interruptions']:>10} {r['reboots']:>7} "
            f"{r['replacements']:>8} "
            f"{r['spare_cost_usd_per_month']:>15,.0f} {r['control_plane_cost_usd']:>15.4f}"
        )
    return "\n".join(lines)


def chart(
    path: Path,
    rows: Sequence[dict[str, Any]],
    policies: Sequence[str],
    scaled: Sequence[dict[str, Any]] = (),
) -> None:
    """ETTR (%) against spares, one line per policy, with Llama 3's 90 % and the 97 % aim; dashed, the
    extrapolation to Llama 3's scale (``at_llama3_scale``) when given."""
    import matplotlib  # noqa: PLC0415 - only the report needs it (and no display)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for policy in policies:
        mine = sorted((r for r in rows if r["policy"] == policy), key=lambda r: r["spares"])
        line = axes.plot(
            [r["spares"] for r in mine], [r["ettr"] * 100 for r in mine], marker="o", label=policy
        )
        extrapolated = sorted((r for r in scaled if r["policy"] == policy), key=lambda r: r["spares"])
        if extrapolated:
            axes.plot(
                [r["spares"] for r in extrapolated],
                [r["ettr_extrapolated"] * 100 for r in extrapolated],
                marker="x",
                linestyle="--",
                color=line[0].get_color(),
                label=f"{policy}, at Llama 3's scale (extrapolated)",
            )
    for level, label in ((97, "97 % aim"), (90, "Llama 3: > 90 %")):
        axes.axhline(level, linestyle="--", linewidth=0.8, color="grey")
        axes.annotate(label, (0, level), textcoords="offset points", xytext=(4, 3), fontsize=8)
    first = rows[0]
    axes.set_title(f"ETTR vs hot spares: {first['gpus']:,} GPUs, {first['days']:g} simulated days")
    axes.set_xlabel("hot spares (nodes)")
    axes.set_ylabel("ETTR (%)")
    axes.legend(title="policy")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
