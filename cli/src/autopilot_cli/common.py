"""What every API command shares: its options, finding the API, exit codes, errors, ``--wait``.

Exit codes: 0 success; 1 the API rejected the request (4xx) or the operation FAILED; 2 usage error;
3 the service or the network failed (5xx, unreachable, no credentials) or ``--wait`` hit its deadline.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TextIO

from botocore.exceptions import BotoCoreError, ProfileNotFound
from botocore.session import Session as BotocoreSession

from autopilot_cli.client import (
    ApiError,
    AutopilotClient,
    ClientError,
    WaitTimeoutError,
    check_endpoint,
    new_idempotency_key,
    region_from_endpoint,
)
from autopilot_cli.config import ENDPOINT_ENV, ConfigError, load_config
from autopilot_cli.output import DEFAULT_OUTPUT, OUTPUTS, Output, QueryError, compile_query
from autopilot_cli.progress import WaitProgress
from autopilot_cli.views import print_operation

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_SERVICE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for Ctrl-C

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

# A command: (args, stdout, stderr) -> exit code; set as the subparser's ``func``.
Command = Callable[[argparse.Namespace, TextIO, TextIO], int]


class UsageError(Exception):
    """Bad invocation: exit 2."""


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (``--help`` is the reference, so none is implicit)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is argparse.SUPPRESS:  # --help, --version
            return text
        if not action.option_strings or action.required or "default" in text:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        return f"{text} (default: %(default)s)"


def add_command(
    subparsers: SubParsers, name: str, summary: str, parents: Sequence[argparse.ArgumentParser] = ()
) -> argparse.ArgumentParser:
    return subparsers.add_parser(
        name, help=summary, description=summary, parents=list(parents), formatter_class=HelpFormatter
    )


def output_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--output",
        "--format",
        dest="output",
        choices=OUTPUTS,
        default=DEFAULT_OUTPUT,
        help="table for people, json (one document on stdout, errors too) or text (tab-separated)",
    )
    options.add_argument(
        "--query", metavar="JMESPATH", help="select from the result first (default: the whole result)"
    )
    options.add_argument(
        "--debug",
        action="store_true",
        help="print each API request and answer on stderr (without credentials or signature)",
    )
    return options


def api_options(region_help: str | None = None) -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False, parents=[output_options()])
    options.add_argument(
        "--endpoint",
        metavar="URL",
        type=endpoint_url,
        help=f"the API's base URL (default: ${ENDPOINT_ENV}, else the endpoint `autopilot configure` saved)",
    )
    options.add_argument(
        "--region",
        type=region_name,
        help=region_help
        or "the region to sign for (default: the region in an execute-api endpoint's host, else the "
        "saved one, else the AWS profile's)",
    )
    options.add_argument(
        "--profile", help="the AWS profile to sign with (default: $AWS_PROFILE, else the default chain)"
    )
    return options


def wait_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--wait", action="store_true", help="follow the operation until it ends, progress on stderr"
    )
    options.add_argument("--timeout", type=float, default=7200.0, help="--wait deadline in seconds")
    options.add_argument("--poll", type=float, default=5.0, help="--wait poll interval in seconds")
    return options


def idempotency_options() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="sent as Idempotency-Key, so retries of this request are answered with its operation "
        "(default: a new key per invocation; repeat a key to retry an earlier invocation safely)",
    )
    return options


def endpoint_url(value: str) -> str:
    """``--endpoint``'s type: an http(s) URL (argparse prints the reason and the usage otherwise)."""
    try:
        return check_endpoint(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def region_name(value: str) -> str:
    """``--region``'s type: a region botocore knows SageMaker in (a typo would only fail later, as a
    signature or endpoint error, or never: ``validate`` would check against a region nobody uses)."""
    known = known_regions()
    if value in known:
        return value
    close = difflib.get_close_matches(value, sorted(known), n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(
        f"unknown region {value!r}: {hint}(a region newer than this botocore needs a botocore upgrade)"
    )


@functools.cache
def known_regions() -> frozenset[str]:
    session = BotocoreSession()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for region in session.get_available_regions("sagemaker", partition_name=partition)
    )


def idempotency_key(args: argparse.Namespace) -> str:
    """One key per invocation: the client's own retries of the request reuse it. Kept on ``args``, so
    an interrupted command can tell it (repeating the request with it is then safe)."""
    if not args.idempotency_key:
        args.idempotency_key = new_idempotency_key()
    return str(args.idempotency_key)


def make_client(
    endpoint: str, *, region: str | None, profile: str | None, debug: TextIO | None = None
) -> AutopilotClient:
    try:
        return AutopilotClient(endpoint, region=region, session=BotocoreSession(profile=profile), debug=debug)
    except ProfileNotFound as exc:
        raise UsageError(str(exc)) from exc


def connect(args: argparse.Namespace) -> AutopilotClient:
    saved = load_config()
    endpoint = args.endpoint or os.environ.get(ENDPOINT_ENV) or saved.endpoint
    if not endpoint:
        raise UsageError(
            f"no endpoint: pass --endpoint, set ${ENDPOINT_ENV} or run `autopilot configure --stack NAME`"
        )
    if not args.endpoint:  # --endpoint was checked by argparse; these were written by hand or earlier
        source = (
            f"${ENDPOINT_ENV}" if os.environ.get(ENDPOINT_ENV) else "the endpoint `autopilot configure` saved"
        )
        try:
            check_endpoint(endpoint)
        except ValueError as exc:
            raise UsageError(f"{source}: {exc}") from exc
    # The host's region beats the saved one and the profile's: API Gateway accepts no other.
    region = args.region or region_from_endpoint(endpoint) or saved.region
    return make_client(
        endpoint, region=region, profile=args.profile, debug=sys.stderr if args.debug else None
    )


Action = Callable[[AutopilotClient, argparse.Namespace, Output], int]


def api_command(action: Action) -> Command:
    """A command that calls the API: ``action`` runs with a client for the endpoint found."""

    def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
        return guarded(args, out, err, lambda output: action(connect(args), args, output))

    return run


def guarded(args: argparse.Namespace, out: TextIO, err: TextIO, body: Callable[[Output], int]) -> int:
    """Runs ``body``; every failure becomes its exit code and an error in the chosen output."""
    output = Output(args.output, None, out, err)
    try:
        output = Output(args.output, compile_query(args.query), out, err)
        return body(output)
    except (UsageError, QueryError, ConfigError) as exc:
        output.error("UsageError", str(exc))
        return EXIT_USAGE
    except (ClientError, BotoCoreError) as exc:
        output.error("ClientError", str(exc))
        return EXIT_SERVICE
    except ApiError as exc:
        report_api_error(exc, output, getattr(args, "body_flags", None) or {})
        return EXIT_REJECTED if exc.is_client_error else EXIT_SERVICE
    except KeyboardInterrupt:  # no operation followed yet: the request may or may not have reached the API
        interrupted(output, args, "interrupted; the request may have reached the API", [])
        return EXIT_INTERRUPTED


def interrupted(
    output: Output, args: argparse.Namespace, message: str, lines: list[str], operation_id: str | None = None
) -> None:
    """Ctrl-C: what goes on and how to come back to it, on stderr (and the error document, with the
    operation and the key, on stdout in JSON mode, so a script reading it still gets one)."""
    key = getattr(args, "idempotency_key", None)
    if key:
        lines = [
            *lines,
            f"Idempotency-Key: {key} (repeat the command with --idempotency-key {key}: the API answers "
            "with the operation this request started, if it started one, instead of starting another)",
        ]
    if output.json:
        output.error("Interrupted", message, lines, operationId=operation_id, idempotencyKey=key)
    print(f"error: {message}", file=output.err)
    for line in lines:
        print(f"  {line}", file=output.err)


def _with_flag(problem: dict[str, Any], body_flags: dict[str, str]) -> dict[str, Any]:
    """``budget.monthlyLimitUsd`` in the body is ``--budget-usd`` to the person who typed it."""
    path = str(problem.get("path") or "")
    if problem.get("location") not in (None, "body") or problem.get("file"):
        return problem
    for field, flag in body_flags.items():
        if path == field or path.startswith((f"{field}.", f"{field}[")):
            return {**problem, "location": flag, "path": path}
    return problem


def format_problem(problem: dict[str, Any]) -> str:
    """``<file>: <path>: <message>`` as ``autopilot validate`` prints it (file/path when known)."""
    parts = [str(p) for p in (problem.get("file") or problem.get("location"), problem.get("path")) if p]
    return ": ".join([*parts, str(problem.get("message", ""))])


def report_api_error(exc: ApiError, output: Output, body_flags: dict[str, str] | None = None) -> None:
    """The API's error; a problem in a body field the command filled from a flag names the flag."""
    lines = [format_problem(_with_flag(problem, body_flags or {})) for problem in exc.errors]
    if exc.operation_id:
        lines.append(f"operation: {exc.operation_id}")
    output.error(
        "ApiError",
        f"{exc.message} (HTTP {exc.status})",
        lines,
        status=exc.status,
        errors=exc.errors or None,
        operationId=exc.operation_id,
    )


def warn(problems: Sequence[Any], output: Output) -> None:
    for problem in problems:
        text = format_problem(problem) if isinstance(problem, dict) else str(problem)
        print(f"warning: {text}", file=output.err)


def accepted(
    client: AutopilotClient, answer: dict[str, Any], args: argparse.Namespace, output: Output
) -> int:
    """An OperationAccepted answer: shown as is, or followed with --wait."""
    warn(answer.get("warnings") or [], output)
    if not args.wait:
        output.result(answer, _accepted_view)
        return EXIT_OK
    output.progress(f"operation {answer['operationId']} accepted for cluster {answer['clusterName']}")
    return follow(client, answer["operationId"], args, output)


def _accepted_view(answer: dict[str, Any], out: TextIO) -> None:
    print(f"operation {answer['operationId']} accepted for cluster {answer['clusterName']}", file=out)
    print(f"follow it: autopilot operations get {answer['operationId']} --wait", file=out)


def follow(client: AutopilotClient, operation_id: str, args: argparse.Namespace, output: Output) -> int:
    """Poll the operation (and its cluster, for SageMaker's side) until it ends or --timeout."""
    # now: the API's (its Date header), the clock of the times it answers; the caller's before any answer
    progress = WaitProgress(
        output.progress,
        now=lambda: client.server_now or datetime.now(timezone.utc),
        monotonic=time.monotonic,
    )

    def show(operation: dict[str, Any]) -> None:
        progress.update(operation, _cluster_or_none(client, operation["clusterName"]))

    try:
        operation = client.wait_for_operation(
            operation_id, timeout_seconds=args.timeout, poll_seconds=args.poll, on_progress=show
        )
    except KeyboardInterrupt:
        interrupted(
            output,
            args,
            f"stopped waiting; operation {operation_id} goes on without you",
            [f"follow it with: autopilot operations get {operation_id} --wait"],
            operation_id,
        )
        return EXIT_INTERRUPTED
    except WaitTimeoutError as exc:
        status = exc.operation.get("status")
        output.error(
            "WaitTimeout",
            f"operation {operation_id} is still {status} after --timeout {args.timeout:g} s; "
            f"follow it with: autopilot operations get {operation_id} --wait",
            operationId=operation_id,
            status=status,
        )
        return EXIT_SERVICE
    progress.finish(operation)
    # what went wrong without failing it (e.g. a Continuous cluster InService short of instances)
    warn(operation.get("warnings") or [], output)
    output.result(operation, print_operation)
    if operation.get("status") == "FAILED":
        if not output.json:
            error = operation.get("error") or {}
            cause = f"{error.get('error', 'failed')}: {error.get('cause', '')}".rstrip(": ")
            print(f"error: {cause}", file=output.err)
        return EXIT_REJECTED
    return EXIT_OK


def _cluster_or_none(client: AutopilotClient, name: str) -> dict[str, Any] | None:
    """The cluster's view for the progress line; a failed read only leaves SageMaker's side unknown."""
    try:
        return client.get_cluster(name)
    except ApiError:
        return None
