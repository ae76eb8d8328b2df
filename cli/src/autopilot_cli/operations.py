"""``autopilot operations list|get``: what Autopilot did to a cluster, and how it went."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from autopilot_cli.client import AutopilotClient
from autopilot_cli.common import (
    EXIT_OK,
    EXIT_REJECTED,
    add_command,
    api_command,
    api_options,
    follow,
    wait_options,
)
from autopilot_cli.output import Output
from autopilot_cli.views import print_operation, print_operations

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers


# The API's OperationType values (tests/unit/test_cli_contract.py keeps them equal): a typo is a usage
# error here, not an empty list from the API.
OPERATION_KINDS = ("CreateCluster", "DeleteCluster", "ReplaceNode", "ScaleToMin", "ScaleInstanceGroup")


def add_parsers(subparsers: SubParsers) -> None:
    common = api_options()
    operations = subparsers.add_parser("operations", help="list a cluster's operations, follow one")
    actions = operations.add_subparsers(dest="operations_command", required=True, metavar="ACTION")

    listing = add_command(actions, "list", "list a cluster's operations, newest first", [common])
    listing.add_argument("cluster")
    listing.add_argument(
        "--kind", choices=OPERATION_KINDS, help="only this kind of operation (default: every kind)"
    )
    listing.set_defaults(func=api_command(run_list))

    get = add_command(actions, "get", "show an operation", [common, wait_options()])
    get.add_argument("operation_id", metavar="OPERATION_ID")
    get.set_defaults(func=api_command(run_get))


def run_list(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    output.result(list(client.list_operations(args.cluster, kind=args.kind)), print_operations)
    return EXIT_OK


def run_get(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    if args.wait:
        return follow(client, args.operation_id, args, output)
    operation = client.get_operation(args.operation_id)
    output.result(operation, print_operation)
    return EXIT_REJECTED if operation.get("status") == "FAILED" else EXIT_OK
