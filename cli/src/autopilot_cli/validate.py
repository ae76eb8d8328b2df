"""``autopilot validate``: check cluster-config.json (and provisioning-parameters.json) before creating.

Locally with the API's own rules (``autopilot_config.validation``, the same package the Lambda layer runs),
or with ``--remote`` through ``POST /validate`` (the deployed stack's rules and region).
Exit codes: 0 valid, 1 invalid, 2 usage error, 3 valid as far as checked but an ``--aws`` check could
not run; ``--remote`` fails as every API command does (3 on a service or network failure).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from autopilot_config.validation import (
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
from autopilot_config.validation.execution_roles import DEFAULT_NAME_PATTERNS
from botocore.session import Session as BotocoreSession

from autopilot_cli.common import UsageError, add_command, api_options, connect, guarded
from autopilot_cli.config import ENDPOINT_ENV, load_config
from autopilot_cli.output import Output

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

EXIT_OK, EXIT_INVALID, EXIT_UNCHECKED = 0, 1, 3


def add_parsers(subparsers: SubParsers) -> None:
    parser = add_command(
        subparsers,
        "validate",
        "check cluster-config.json (and provisioning-parameters.json) before creating a cluster",
        [api_options(region_help="the region the cluster will be created in (default: the AWS profile's)")],
    )
    parser.description = (
        "Check a HyperPod CreateCluster request and its Slurm provisioning parameters, here with the "
        "API's own rules or with --remote through the API. Exit 0 when valid (warnings may be printed), "
        "1 when invalid (with --strict, also on a warning), 2 on a usage error, 3 when valid as far as "
        "checked but an --aws check could not "
        "run (no credentials, access denied, unreachable)."
    )
    parser.add_argument(
        "--cluster-config",
        required=True,
        type=Path,
        metavar="FILE",
        help="the CreateCluster request, as `aws sagemaker create-cluster --cli-input-json` reads (required)",
    )
    parser.add_argument(
        "--provisioning-parameters", type=Path, metavar="FILE", help="Slurm's (default: none)"
    )
    place = parser.add_mutually_exclusive_group()
    place.add_argument(
        "--aws",
        action="store_true",
        help="also check against your AWS account: subnets, security groups, FSx, S3 scripts, IAM roles",
    )
    place.add_argument(
        "--remote",
        action="store_true",
        help="validate through the API (POST /validate): the deployed stack's rules, region and patterns",
    )
    parser.add_argument(
        "--execution-role-name-patterns",
        default=",".join(DEFAULT_NAME_PATTERNS),
        metavar="PATTERNS",
        help="the Autopilot stack's ExecutionRoleNamePatterns (default: %(default)s)",
    )
    parser.add_argument("--strict", action="store_true", help="fail (exit 1) on warnings too, as on errors")
    parser.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return guarded(args, out, err, lambda output: _validate(args, output))


def _validate(args: argparse.Namespace, output: Output) -> int:
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
    elif args.remote:
        report = _remote(args, documents)
    else:
        report = validate_config(
            documents[CLUSTER_CONFIG],
            documents.get(PROVISIONING_PARAMETERS),
            online=_online_checker(args) if args.aws else None,
            region=args.region,
            execution_roles=ExecutionRolePolicy(split_patterns(args.execution_role_name_patterns)),
        )
    _print_report(report, names, output)
    if not report.valid or (args.strict and report.warnings):
        return EXIT_INVALID
    return EXIT_OK if report.complete else EXIT_UNCHECKED


def _remote(args: argparse.Namespace, documents: dict[str, dict[str, Any]]) -> ValidationReport:
    body: dict[str, Any] = {"clusterConfig": documents[CLUSTER_CONFIG]}
    if PROVISIONING_PARAMETERS in documents:
        body["provisioningParameters"] = documents[PROVISIONING_PARAMETERS]
    result = connect(args).validate(body)

    def problems(key: str) -> list[Problem]:
        return [
            Problem(file=p.get("file") or p.get("location") or "", path=p["path"], message=p["message"])
            for p in result.get(key) or []
        ]

    return ValidationReport(errors=problems("errors"), warnings=problems("warnings"))


def _load(path: Path, role: str) -> dict[str, Any] | Problem:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Problem(file=role, path="", message="is not UTF-8 text")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return load_document(text, role)


def _online_checker(args: argparse.Namespace) -> OnlineChecker:
    session = BotocoreSession(profile=args.profile)
    region = args.region or session.get_config_variable("region")
    if not region:
        raise UsageError("--aws needs a region: pass --region or configure a default region")

    def client(service: str) -> Any:
        return session.create_client(service, region_name=region)

    return OnlineChecker(
        region=region,
        ec2=client("ec2"),
        s3=client("s3"),
        iam=client("iam"),
        fsx=client("fsx"),
        service_quotas=client("service-quotas"),
        # the Slurm agent's route is on Autopilot's API: --endpoint, else the configured one
        api_endpoint=getattr(args, "endpoint", None)
        or os.environ.get(ENDPOINT_ENV)
        or load_config().endpoint,
    )


def _print_report(report: ValidationReport, names: dict[str, str], output: Output) -> None:
    def renamed(problems: Sequence[Problem]) -> list[Problem]:
        return [
            problem.model_copy(update={"file": names.get(problem.file, problem.file)}) for problem in problems
        ]

    shown = ValidationReport(
        errors=renamed(report.errors), warnings=renamed(report.warnings), unchecked=renamed(report.unchecked)
    )

    def view(_: Any, out: TextIO) -> None:
        for problem in shown.errors:
            print(problem, file=out)
        for problem in shown.warnings:
            print(f"warning: {problem}", file=out)
        for problem in shown.unchecked:
            print(f"unchecked: {problem}", file=out)

    output.result(shown.to_dict(), view)
    verdict = "valid" if shown.valid else "invalid"
    summary = f"{verdict}: {len(shown.errors)} error(s), {len(shown.warnings)} warning(s)"
    if shown.unchecked:
        summary += f", {len(shown.unchecked)} check(s) could not run"
    print(summary, file=output.err)
