"""``python -m sandbox.apps.simulate`` (``make simulate``): the fleet what-if
(sandbox/apps/simulate/__init__.py)."""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from sandbox.apps.simulate.failures import LLAMA3_DAYS, LLAMA3_NODES
from sandbox.apps.simulate.fleet import POLICIES, SimulationOptions, merge, run_logged
from sandbox.apps.simulate.report import at_llama3_scale, chart, entries, table, write_json

DEFAULTS = SimulationOptions()
# The policies' clusters share nothing but the failure trace: one process (and one sandbox) each
# uses the machine's cores; the sandbox itself runs in one process.
DEFAULT_PROCESSES = max(1, min(len(DEFAULTS.policies), os.cpu_count() or 1))
DEFAULT_REPORT = Path("build") / "fleet-sim.json"


def _int_list(text: str) -> tuple[int, ...]:
    values = tuple(dict.fromkeys(int(v) for v in text.split(",") if v.strip()))
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError("a comma-separated list of counts >= 0")
    return values


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return value


def _policies(text: str) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(v.strip() for v in text.split(",") if v.strip()))
    unknown = sorted(set(values) - set(POLICIES))
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"policies among {', '.join(POLICIES)}; unknown: {unknown}")
    return values


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sandbox.apps.simulate",
        description="Run a fleet through the real control plane in the sandbox (frozen clock, jumped from "
        "event to event) with failures at Llama 3's rates, for each healing policy and spare count; "
        "write the ETTR / cost report and the ETTR-vs-spares chart.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--nodes", type=int, default=DEFAULTS.nodes, help="nodes the training job needs (8 GPUs each)"
    )
    p.add_argument("--days", type=float, default=DEFAULTS.days, help="simulated days")
    p.add_argument(
        "--spares",
        type=_int_list,
        default=",".join(map(str, DEFAULTS.spares)),
        help="hot spare counts (comma-separated)",
    )
    p.add_argument(
        "--policies",
        type=_policies,
        default=",".join(DEFAULTS.policies),
        help="hyperpod: NodeRecovery Automatic (HyperPod repairs, Autopilot observes); autopilot: "
        "NodeRecovery None (Autopilot reboots or replaces, escalating a reboot that does not heal)",
    )
    p.add_argument(
        "--checkpoint-minutes", type=float, default=DEFAULTS.checkpoint_minutes, help="checkpoint interval"
    )
    p.add_argument(
        "--restart-minutes",
        type=float,
        default=DEFAULTS.restart_minutes,
        help="job restart once it has its nodes",
    )
    p.add_argument(
        "--drain-timeout-minutes",
        type=float,
        default=DEFAULTS.drain_timeout_minutes,
        help="DrainTimeoutMinutes of the autopilot policy's drain-first repair (the repair-kill accounting)",
    )
    p.add_argument(
        "--reboot-minutes", type=float, default=DEFAULTS.reboot_minutes, help="a node reboot (HyperPod)"
    )
    p.add_argument(
        "--replace-minutes",
        type=float,
        default=DEFAULTS.replace_minutes,
        help="a node replacement (HyperPod)",
    )
    p.add_argument(
        "--rate-scale", type=float, default=DEFAULTS.rate_scale, help="multiplies Llama 3's failure rates"
    )
    p.add_argument(
        "--seed", type=int, default=DEFAULTS.seed, help="seed of the failure trace and the sandbox"
    )
    p.add_argument(
        "--max-concurrent-repairs",
        type=int,
        default=DEFAULTS.max_concurrent_repairs,
        help="template parameter MaxConcurrentRepairs",
    )
    p.add_argument(
        "--max-unhealthy-percent",
        type=int,
        default=DEFAULTS.max_unhealthy_percent,
        help="template parameter MaxUnhealthyPercent (the breaker)",
    )
    p.add_argument(
        "--fallback-poll-seconds",
        type=int,
        default=DEFAULTS.fallback_poll_seconds,
        help="template parameter FallbackPollSeconds (a replacement's new node sends no health event)",
    )
    p.add_argument(
        "--sweep-schedule",
        default=DEFAULTS.sweep_schedule,
        help="template parameter HealingSweepScheduleExpression",
    )
    p.add_argument(
        "--processes",
        type=_positive,
        default=DEFAULT_PROCESSES,
        help="policies simulated at once, each in its own process and sandbox (1: all in this one)",
    )
    p.add_argument(
        "--report", type=Path, default=DEFAULT_REPORT, help="the JSON report; the PNG chart goes beside it"
    )
    p.add_argument(
        "--log", type=Path, default=Path("build") / "fleet-sim.log", help="the sandbox's own output"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    options = SimulationOptions(
        nodes=args.nodes,
        days=args.days,
        spares=args.spares,
        policies=args.policies,
        checkpoint_minutes=args.checkpoint_minutes,
        restart_minutes=args.restart_minutes,
        reboot_minutes=args.reboot_minutes,
        replace_minutes=args.replace_minutes,
        rate_scale=args.rate_scale,
        seed=args.seed,
        max_concurrent_repairs=args.max_concurrent_repairs,
        drain_timeout_minutes=args.drain_timeout_minutes,
        max_unhealthy_percent=args.max_unhealthy_percent,
        fallback_poll_seconds=args.fallback_poll_seconds,
        sweep_schedule=args.sweep_schedule,
    )
    print(
        f"simulating {options.nodes} nodes x {options.days:g} days, policies {', '.join(options.policies)}, "
        f"spares {', '.join(map(str, options.spares))}",
        flush=True,
    )
    args.log.parent.mkdir(parents=True, exist_ok=True)
    processes = min(args.processes, len(options.policies))
    if processes > 1:
        logs = [args.log.with_suffix(f".{policy}{args.log.suffix}") for policy in options.policies]
        print(
            f"one process per policy, {processes} at a time (sandbox output: {', '.join(map(str, logs))})",
            flush=True,
        )
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
            outcome = merge(
                list(
                    pool.map(
                        run_logged,
                        [dataclasses.replace(options, policies=(p,)) for p in options.policies],
                        logs,
                        [f"{policy}: " for policy in options.policies],
                    )
                )
            )
    else:
        print(f"sandbox output: {args.log}", flush=True)
        outcome = run_logged(options, args.log)
    rows = entries(outcome, options)
    write_json(args.report, rows, outcome, options)
    png = args.report.with_suffix(".png")
    at_scale = options.nodes == LLAMA3_NODES and options.days >= LLAMA3_DAYS
    scaled = [] if at_scale else at_llama3_scale(rows)
    chart(png, rows, options.policies, scaled)
    print(table(rows))
    if scaled:
        print("each entry's loss per interruption at Llama 3's rate (419 in 54 days, 2,048 nodes):")
        for r in scaled:
            print(f"  {r['policy']:<10} {r['spares']:>3} spares: ETTR {r['ettr_extrapolated'] * 100:.1f}%")
    print(f"wall {outcome.wall_s:.1f} s, {outcome.steps} clock jumps; wrote {args.report} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
