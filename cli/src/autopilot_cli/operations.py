"""``autopilot operations list|get``: what Autopilot did to a cluster, and how it went."""

from __future__ import annotations

import argparse
import itertools
import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

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
    listing.add_argument(
        "--watch",
        action="store_true",
        help="then keep watching: one line per new operation or change of status, until Ctrl-C "
        "(JSON Lines with --output json)",
    )
    listing.add_argument("--poll", type=float, default=5.0, help="--watch's poll interval in seconds")
    listing.set_defaults(func=api_command(run_list))

    get = add_command(actions, "get", "show an operation", [common, wait_options()])
    get.add_argument("operation_id", metavar="OPERATION_ID")
    get.set_defaults(func=api_command(run_get))


WATCHED = 50  # newest operations compared on each poll (one page)
_sleep = time.sleep  # (tests stop the watch here)


def run_list(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    if args.watch:
        return _watch(client, args, output)
    output.result(list(client.list_operations(args.cluster, kind=args.kind)), print_operations)
    return EXIT_OK


def _watch(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    """Like ``kubectl get --watch``: what changed since the last poll, as it happens. Ctrl-C is how a
    watch ends, so it exits 0."""
    seen: dict[str, str] = {}
    try:
        while True:
            newest = list(itertools.islice(client.list_operations(args.cluster, kind=args.kind), WATCHED))
            for operation in reversed(newest):  # oldest first, as a log reads
                if seen.get(operation["operationId"]) != operation["status"]:
                    seen[operation["operationId"]] = operation["status"]
                    _watch_line(operation, output)
            _sleep(args.poll)
    except KeyboardInterrupt:
        return EXIT_OK


def _watch_line(operation: dict[str, Any], output: Output) -> None:
    if output.json:
        print(json.dumps(operation, sort_keys=True), file=output.out, flush=True)
        return
    seen_at = datetime.now(timezone.utc).strftime("%H:%M:%S")
    detail = operation.get("nodeId") or ""
    if operation.get("error"):
        detail = f"{operation['error'].get('error')}: {operation['error'].get('cause', '')}"
    fields = (seen_at, operation["operationId"], operation["kind"], operation["status"], detail)
    print("  ".join(field for field in fields if field), file=output.out, flush=True)


def run_get(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    if args.wait:
        return follow(client, args.operation_id, args, output)
    operation = client.get_operation(args.operation_id)
    output.result(operation, print_operation)
    return EXIT_REJECTED if operation.get("status") == "FAILED" else EXIT_OK
