"""``autopilot clusters create|list|get|delete`` and ``autopilot operations get``: the API from a shell.

Exit codes: 0 success; 1 the API rejected the request (4xx) or the operation FAILED; 2 usage error;
3 the service or the network failed (5xx, unreachable, no credentials) or ``--wait`` hit its deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from autopilot.client import (
    ApiError,
    AutopilotClient,
    ClientError,
    WaitTimeoutError,
    new_idempotency_key,
)

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_SERVICE = 0, 1, 2, 3
ENDPOINT_ENV = "AUTOPILOT_ENDPOINT"

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]


class UsageError(Exception):
    """Bad invocation: exit 2."""


def add_parsers(subparsers: SubParsers) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--endpoint", help=f"API base URL, e.g. http://127.0.0.1:3000 (default: ${ENDPOINT_ENV})"
    )
    common.add_argument("--region", help="region to sign for (default: the AWS profile's region)")
    common.add_argument("--format", choices=("text", "json"), default="text")

    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--wait", action="store_true", help="follow the operation until it finishes")
    waiting.add_argument("--timeout", type=float, default=7200.0, help="--wait deadline in seconds")
    waiting.add_argument("--poll", type=float, default=5.0, help="--wait poll interval in seconds")

    keyed = argparse.ArgumentParser(add_help=False)
    keyed.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="sent as Idempotency-Key, so retries of this request are answered with its operation "
        "(default: a new key per invocation; repeat a key to retry an earlier invocation safely)",
    )

    clusters = subparsers.add_parser("clusters", help="create, list, inspect and delete clusters")
    cluster_commands = clusters.add_subparsers(dest="clusters_command", required=True, metavar="ACTION")

    create = cluster_commands.add_parser(
        "create", parents=[common, waiting, keyed], help="create a cluster from cluster-config.json"
    )
    create.add_argument("--cluster-config", required=True, type=Path, metavar="FILE")
    create.add_argument("--provisioning-parameters", type=Path, metavar="FILE")
    create.add_argument("--owner", required=True, help="the owner cost tag")
    create.add_argument("--project", required=True, help="the project cost tag")
    create.add_argument("--budget-usd", type=float, help="create a monthly budget with this limit")
    create.add_argument("--alert-email", action="append", default=[], help="budget alert e-mail (repeatable)")
    create.add_argument(
        "--rollback-on-failure", action="store_true", help="delete the cluster if creation fails"
    )
    create.set_defaults(func=run_create)

    listing = cluster_commands.add_parser("list", parents=[common], help="list clusters")
    listing.add_argument("--include-deleted", action="store_true")
    listing.set_defaults(func=run_list)

    get = cluster_commands.add_parser("get", parents=[common], help="describe a cluster")
    get.add_argument("name")
    get.add_argument("--nodes", action="store_true", help="also list its nodes")
    get.set_defaults(func=run_get)

    delete = cluster_commands.add_parser("delete", parents=[common, waiting, keyed], help="delete a cluster")
    delete.add_argument("name")
    delete.add_argument("--stack-name", help="CloudFormation stack to delete once the cluster is gone")
    delete.set_defaults(func=run_delete)

    operations = subparsers.add_parser("operations", help="follow operations")
    operation_commands = operations.add_subparsers(dest="operations_command", required=True, metavar="ACTION")
    op_get = operation_commands.add_parser("get", parents=[common, waiting], help="show an operation")
    op_get.add_argument("operation_id")
    op_get.set_defaults(func=run_operation)


# --- commands ----------------------------------------------------------------------------------


def _client(args: argparse.Namespace) -> AutopilotClient:
    endpoint = args.endpoint or os.environ.get(ENDPOINT_ENV)
    if not endpoint:
        raise UsageError(f"no endpoint: pass --endpoint or set {ENDPOINT_ENV}")
    return AutopilotClient(endpoint, region=args.region)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}") from exc


def run_create(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    def create(client: AutopilotClient) -> int:
        accepted = client.create_cluster(_create_body(args), idempotency_key=_idempotency_key(args))
        return _accepted(client, accepted, args, out, err)

    return _guard(args, err, create)


def _idempotency_key(args: argparse.Namespace) -> str:
    """One key per invocation: the client's own retries of the request reuse it."""
    return str(args.idempotency_key or new_idempotency_key())


def _create_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "clusterConfig": _read_json(args.cluster_config),
        "owner": args.owner,
        "project": args.project,
        "rollbackOnFailure": args.rollback_on_failure,
    }
    if args.provisioning_parameters:
        body["provisioningParameters"] = _read_json(args.provisioning_parameters)
    if args.budget_usd is not None:
        body["budget"] = {"monthlyLimitUsd": args.budget_usd, "alertEmails": args.alert_email}
    elif args.alert_email:
        raise UsageError("--alert-email needs --budget-usd")
    return body


def run_delete(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return _guard(
        args,
        err,
        lambda client: _accepted(
            client,
            client.delete_cluster(
                args.name, stack_name=args.stack_name, idempotency_key=_idempotency_key(args)
            ),
            args,
            out,
            err,
        ),
    )


def run_list(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    def list_clusters(client: AutopilotClient) -> int:
        clusters = list(client.list_clusters(include_deleted=args.include_deleted))
        if args.format == "json":
            _print_json(clusters, out)
        elif not clusters:
            print("no clusters", file=out)
        else:
            rows = [("NAME", "STATUS", "OWNER", "PROJECT", "LAST OPERATION")]
            rows += [
                (
                    c["clusterName"],
                    c["status"],
                    c.get("owner") or "-",
                    c.get("project") or "-",
                    c["lastOperationId"],
                )
                for c in clusters
            ]
            _print_table(rows, out)
        return EXIT_OK

    return _guard(args, err, list_clusters)


def run_get(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    def get(client: AutopilotClient) -> int:
        cluster = client.get_cluster(args.name)
        nodes = list(client.list_nodes(args.name)) if args.nodes else None
        if args.format == "json":
            _print_json({**cluster, "nodes": nodes} if nodes is not None else cluster, out)
            return EXIT_OK
        live = cluster.get("sagemaker") or {}
        print(f"cluster     {cluster['clusterName']}", file=out)
        print(f"autopilot   {cluster.get('status') or 'not managed by Autopilot'}", file=out)
        print(f"sagemaker   {live.get('ClusterStatus') or 'not found'}", file=out)
        for label, key in (("owner", "owner"), ("project", "project"), ("budget", "budgetName")):
            if cluster.get(key):
                print(f"{label:<11} {cluster[key]}", file=out)
        if live.get("FailureMessage"):
            print(f"failure     {live['FailureMessage']}", file=out)
        groups = live.get("InstanceGroups") or []
        if groups:
            rows = [("GROUP", "TYPE", "COUNT", "STATUS")]
            rows += [
                (
                    g["InstanceGroupName"],
                    g.get("InstanceType") or "-",
                    f"{g.get('CurrentCount', '-')}/{g.get('TargetCount', '-')}",
                    g.get("Status") or "-",
                )
                for g in groups
            ]
            _print_table(rows, out)
        if nodes is not None:
            rows = [("NODE", "GROUP", "TYPE", "STATUS")]
            rows += [
                (n["InstanceId"], n["InstanceGroupName"], n["InstanceType"], n["InstanceStatus"]["Status"])
                for n in nodes
            ]
            _print_table(rows, out)
        return EXIT_OK

    return _guard(args, err, get)


def run_operation(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    def show(client: AutopilotClient) -> int:
        if args.wait:
            return _follow(client, args.operation_id, args, out, err)
        operation = client.get_operation(args.operation_id)
        if args.format == "json":
            _print_json(operation, out)
        else:
            print_operation(operation, out)
        return EXIT_REJECTED if operation.get("status") == "FAILED" else EXIT_OK

    return _guard(args, err, show)


# --- helpers -----------------------------------------------------------------------------------


def _accepted(
    client: AutopilotClient, accepted: dict[str, Any], args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    for warning in accepted.get("warnings") or []:
        print(f"warning: {format_problem(warning)}", file=err)
    if args.format == "json" and not args.wait:
        _print_json(accepted, out)
        return EXIT_OK
    print(f"operation {accepted['operationId']} accepted for cluster {accepted['clusterName']}", file=out)
    if not args.wait:
        print(f"follow it: autopilot operations get {accepted['operationId']} --wait", file=out)
        return EXIT_OK
    return _follow(client, accepted["operationId"], args, out, err)


def _follow(
    client: AutopilotClient, operation_id: str, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    progress = ProgressDisplay(out)
    try:
        operation = client.wait_for_operation(
            operation_id, timeout_seconds=args.timeout, poll_seconds=args.poll, on_progress=progress.update
        )
    except WaitTimeoutError as exc:
        progress.finish(exc.operation)
        print(f"error: {exc}", file=err)
        return EXIT_SERVICE
    progress.finish(operation)
    if args.format == "json":
        _print_json(operation, out)
    if operation.get("status") == "FAILED":
        error = operation.get("error") or {}
        print(f"error: {error.get('error', 'failed')}: {error.get('cause', '')}".rstrip(": "), file=err)
        return EXIT_REJECTED
    return EXIT_OK


def _guard(args: argparse.Namespace, err: TextIO, action: Any) -> int:
    try:
        client = _client(args)
        result: int = action(client)
    except UsageError as exc:
        print(f"autopilot: error: {exc}", file=err)
        return EXIT_USAGE
    except ClientError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_SERVICE
    except ApiError as exc:
        print_api_error(exc, err)
        return EXIT_REJECTED if exc.is_client_error else EXIT_SERVICE
    return result


def format_problem(problem: dict[str, Any]) -> str:
    """``<file>: <path>: <message>`` as ``autopilot validate`` prints it (file/path when known)."""
    parts = [str(p) for p in (problem.get("file") or problem.get("location"), problem.get("path")) if p]
    return ": ".join([*parts, str(problem.get("message", ""))])


def print_api_error(exc: ApiError, err: TextIO) -> None:
    print(f"error: {exc.message} (HTTP {exc.status})", file=err)
    for problem in exc.errors:
        print(f"  {format_problem(problem)}", file=err)
    if exc.operation_id:
        print(f"  operation: {exc.operation_id}", file=err)


def _elapsed(start: str, end: str) -> str:
    seconds = int((_parse(end) - _parse(start)).total_seconds())
    minutes, seconds = divmod(max(seconds, 0), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _parse(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def step_lines(operation: dict[str, Any], now: str | None = None) -> list[str]:
    """One line per step with how long it took (the last one: so far, or until the operation ended)."""
    steps = operation.get("steps") or []
    end = now or operation.get("updatedAt") or ""
    lines = []
    for index, step in enumerate(steps):
        finished = steps[index + 1]["enteredAt"] if index + 1 < len(steps) else end
        lines.append(
            f"  {step['name']:<24} {_elapsed(step['enteredAt'], finished) if finished else ''}".rstrip()
        )
    return lines


class ProgressDisplay:
    """Prints each step once as it starts, with the time the previous step took."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._shown = 0
        self._status: str | None = None

    def update(self, operation: dict[str, Any]) -> None:
        steps = operation.get("steps") or []
        if self._status is None:
            print(
                f"{operation.get('kind')} {operation.get('clusterName')} ({operation.get('operationId')})",
                file=self._out,
            )
        for index in range(self._shown, len(steps)):
            if index > 0:
                took = _elapsed(steps[index - 1]["enteredAt"], steps[index]["enteredAt"])
                print(f"    done in {took}", file=self._out)
            print(f"  > {steps[index]['name']}", file=self._out)
        self._shown = len(steps)
        self._status = str(operation.get("status"))
        self._out.flush()

    def finish(self, operation: dict[str, Any]) -> None:
        print(f"{operation.get('status')}", file=self._out)
        for line in step_lines(operation):
            print(line, file=self._out)


def print_operation(operation: dict[str, Any], out: TextIO) -> None:
    print(f"operation   {operation['operationId']}", file=out)
    print(f"kind        {operation['kind']}", file=out)
    print(f"cluster     {operation['clusterName']}", file=out)
    print(f"status      {operation['status']}", file=out)
    if operation.get("executionArn"):
        print(f"execution   {operation['executionArn']}", file=out)
    if operation.get("error"):
        print(f"error       {operation['error']['error']}: {operation['error']['cause']}", file=out)
    if operation.get("leftovers"):
        print("leftovers   " + ", ".join(operation["leftovers"]), file=out)
    for line in step_lines(operation):
        print(line, file=out)


def _print_json(value: Any, out: TextIO) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), file=out)


def _print_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out
        )
