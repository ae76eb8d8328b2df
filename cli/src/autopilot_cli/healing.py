"""``autopilot healing get|pause|resume`` and ``autopilot cost``: a cluster's self-healing switch and
its spend."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from autopilot_cli.client import AutopilotClient
from autopilot_cli.common import EXIT_OK, add_command, api_command, api_options
from autopilot_cli.output import Output
from autopilot_cli.views import print_document

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers


def add_parsers(subparsers: SubParsers) -> None:
    common = api_options()
    healing = subparsers.add_parser("healing", help="show, pause or resume a cluster's self-healing")
    actions = healing.add_subparsers(dest="healing_command", required=True, metavar="ACTION")
    for action, summary in (
        ("get", "show whether healing is paused, its breaker and the repairs in flight"),
        ("pause", "stop starting repairs on this cluster (repairs in flight finish)"),
        ("resume", "start repairing again (and reset the breaker's count)"),
    ):
        command = add_command(actions, action, summary, [common])
        command.add_argument("cluster")
        if action == "pause":
            command.add_argument("--reason", help="why, shown to whoever looks (default: none)")
        command.set_defaults(
            func=api_command(run_healing), action=action, reason=None, body_flags={"reason": "--reason"}
        )

    cost = add_command(
        subparsers,
        "cost",
        "a cluster's hourly rate, month-to-date spend and forecast (list prices)",
        [common],
    )
    cost.add_argument("cluster")
    cost.set_defaults(func=api_command(run_cost))


def run_healing(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    if args.action == "get":
        state = client.get_healing(args.cluster)
    else:
        state = client.set_healing(args.cluster, paused=args.action == "pause", reason=args.reason)
    output.result(state, print_document)
    return EXIT_OK


def run_cost(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    cost = client.get_cost(args.cluster)
    output.result(cost, print_document)
    forecast, budget = cost.get("forecastUsd"), cost.get("budgetUsd")
    if budget and forecast and forecast > budget:  # on stderr in every output form, as warnings are
        print(
            f"warning: the month's forecast, {forecast:,.2f} USD, is {forecast / budget:.1f}x the "
            f"cluster's budget of {budget:,.2f} USD",
            file=output.err,
        )
    return EXIT_OK
