"""The ``autopilot`` command line.

Each subcommand module contributes ``add_parsers(subparsers)``; each subparser sets ``func``
(``args -> exit code``). Exit codes: 0 success, 1 the input is invalid, 2 usage error, 3 (validate
--aws) valid as far as checked, but some checks could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from autopilot import client_cli
from autopilot.validation import (
    CLUSTER_CONFIG,
    PROVISIONING_PARAMETERS,
    ExecutionRolePolicy,
    OnlineChecker,
    Problem,
    ValidationReport,
    load_document,
    split_patterns,
    validate_config,
)
from autopilot.validation.execution_roles import DEFAULT_NAME_PATTERNS

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_UNCHECKED = 0, 1, 2, 3


class UsageError(Exception):
    """Bad invocation (missing file, unusable flags): exit 2 with the message."""


def add_validate_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check cluster-config.json (and provisioning-parameters.json) before creating a cluster",
        description="Check a HyperPod CreateCluster request and its Slurm provisioning parameters. "
        "Exit 0 when valid (warnings may be printed), 1 when invalid, 2 on a usage error, 3 when valid "
        "as far as checked but an --aws check could not run (no credentials, access denied, unreachable).",
    )
    parser.add_argument("--cluster-config", required=True, type=Path, metavar="FILE")
    parser.add_argument("--provisioning-parameters", type=Path, metavar="FILE")
    parser.add_argument(
        "--aws",
        action="store_true",
        help="also check against your AWS account: subnets, security groups, FSx, S3 scripts, IAM roles",
    )
    parser.add_argument(
        "--region",
        help="the region the cluster will be created in (the API validates with its stack's region)",
    )
    parser.add_argument(
        "--execution-role-name-patterns",
        default=",".join(DEFAULT_NAME_PATTERNS),
        metavar="PATTERNS",
        help="the Autopilot stack's ExecutionRoleNamePatterns (default: %(default)s)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run_validate)


# One entry per subcommand module: adding a command group is an import and an entry here.
PARSER_ADDERS: tuple[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None], ...] = (
    add_validate_parser,
    client_cli.add_parsers,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autopilot", description="HyperPod Autopilot command line")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_parsers in PARSER_ADDERS:
        add_parsers(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        func: Callable[[argparse.Namespace], int] = args.func
        return func(args)
    except SystemExit as exc:  # argparse exits on --help and on bad flags; callers want a code
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog} {getattr(args, 'command', '')}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


# -- validate ----------------------------------------------------------------------------------------
def run_validate(args: argparse.Namespace) -> int:
    names = {CLUSTER_CONFIG: args.cluster_config.name}
    documents: dict[str, dict[str, Any]] = {}
    syntax_errors: list[Problem] = []
    sources = [(CLUSTER_CONFIG, args.cluster_config)]
    if args.provisioning_parameters is not None:
        names[PROVISIONING_PARAMETERS] = args.provisioning_parameters.name
        sources.append((PROVISIONING_PARAMETERS, args.provisioning_parameters))
    for role, path in sources:
        loaded = _load(path, role)
        if isinstance(loaded, Problem):
            syntax_errors.append(loaded)
        else:
            documents[role] = loaded
    if syntax_errors:
        report = ValidationReport(errors=syntax_errors)
    else:
        online = OnlineChecker(region=_aws_region(args.region)) if args.aws else None
        report = validate_config(
            documents[CLUSTER_CONFIG],
            documents.get(PROVISIONING_PARAMETERS),
            online=online,
            region=args.region,
            execution_roles=ExecutionRolePolicy(split_patterns(args.execution_role_name_patterns)),
        )
    _print_report(report, names, args.format, sys.stdout)
    if not report.valid:
        return EXIT_INVALID
    return EXIT_OK if report.complete else EXIT_UNCHECKED


def _load(path: Path, role: str) -> dict[str, Any] | Problem:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Problem(file=role, path="", message="is not UTF-8 text")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return load_document(text, role)


def _aws_region(region: str | None) -> str:
    if region:
        return region
    import boto3  # noqa: PLC0415  (only --aws pays for importing boto3)

    configured = boto3.session.Session().region_name
    if not configured:
        raise UsageError("--aws needs a region: pass --region or configure a default region")
    return configured


def _print_report(report: ValidationReport, names: dict[str, str], output: str, stream: TextIO) -> None:
    def renamed(problems: Sequence[Problem]) -> list[Problem]:
        return [
            problem.model_copy(update={"file": names.get(problem.file, problem.file)}) for problem in problems
        ]

    errors, warnings, unchecked = renamed(report.errors), renamed(report.warnings), renamed(report.unchecked)
    if output == "json":
        shown = ValidationReport(errors=errors, warnings=warnings, unchecked=unchecked)
        print(json.dumps(shown.to_dict(), indent=2), file=stream)
        return
    for problem in errors:
        print(problem, file=stream)
    for problem in warnings:
        print(f"warning: {problem}", file=stream)
    for problem in unchecked:
        print(f"unchecked: {problem}", file=stream)
    verdict = "valid" if report.valid else "invalid"
    summary = f"{verdict}: {len(errors)} error(s), {len(warnings)} warning(s)"
    if unchecked:
        summary += f", {len(unchecked)} check(s) could not run"
    print(summary, file=sys.stderr)
