"""``autopilot nodes list|reboot|replace``: a cluster's nodes, and repairs started by hand."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from autopilot_cli.client import AutopilotClient
from autopilot_cli.common import (
    EXIT_OK,
    accepted,
    add_command,
    api_command,
    api_options,
    idempotency_key,
    idempotency_options,
    wait_options,
)
from autopilot_cli.output import Output
from autopilot_cli.views import print_nodes

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers


def add_parsers(subparsers: SubParsers) -> None:
    common = api_options()
    nodes = subparsers.add_parser("nodes", help="list a cluster's nodes, reboot or replace one")
    actions = nodes.add_subparsers(dest="nodes_command", required=True, metavar="ACTION")

    listing = add_command(actions, "list", "list a cluster's nodes", [common])
    listing.add_argument("cluster")
    listing.set_defaults(func=api_command(run_list))

    for action, summary in (
        ("reboot", "reboot a node (a ReplaceNode operation, as self-healing runs one)"),
        ("replace", "replace a node with a new instance (a ReplaceNode operation)"),
    ):
        repair = add_command(actions, action, summary, [common, wait_options(), idempotency_options()])
        repair.add_argument("cluster")
        repair.add_argument(
            "node_id", metavar="NODE_ID", help="the node's InstanceId, e.g. i-0123456789abcdef0"
        )
        repair.set_defaults(func=api_command(run_repair), action=action)


def run_list(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    output.result(list(client.list_nodes(args.cluster)), print_nodes)
    return EXIT_OK


def run_repair(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    start = client.reboot_node if args.action == "reboot" else client.replace_node
    answer = start(args.cluster, args.node_id, idempotency_key=idempotency_key(args))
    return accepted(client, answer, args, output)
