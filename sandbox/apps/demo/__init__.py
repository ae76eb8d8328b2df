"""``python -m sandbox demo``: scripted scenarios against the control plane in the sandbox (docs/demo.md).

    python -m sandbox demo [--scenario NAME ...] [--report build/demo-report.json] [--speed N]
                           [--verbose] [--list]

Exit 0 when every scenario passed, 1 when one failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from sandbox.apps.demo.runner import (
    DEFAULT_REPORT,
    DEFAULT_SPEED,
    DemoOptions,
    UnknownScenarioError,
    load_scenarios,
    run_demo,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox demo",
        description="Run HyperPod Autopilot's scripted scenarios in the embedded sandbox.",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this scenario (repeatable; default: all, see --list)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=DEFAULT_REPORT,
        help="where to write the JSON report (default: %(default)s)",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=DEFAULT_SPEED,
        help="simulated seconds per wall second of the HyperPod/Budgets simulators (default: %(default)g)",
    )
    parser.add_argument(
        "--verbose", action="store_true", help="leave the sandbox's own logs on stderr instead of a log file"
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    registry = load_scenarios()
    if args.list:
        for name in registry.names():
            print(f"{name:<30} {registry.get(name).summary}")
        return 0
    if args.speed <= 0:
        parser.error("--speed must be > 0")
    names = [name for item in args.scenario for name in item.split(",") if name]
    try:
        registry.select(names)
    except UnknownScenarioError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    options = DemoOptions(
        scenarios=tuple(names), report_path=args.report, speed=args.speed, verbose=args.verbose
    )
    return run_demo(options, registry=registry)


__all__ = ["main"]
