"""``autopilot clusters create|list|get|delete|lift-growth-block|scale``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopilot_config.validation import Problem, load_document
from autopilot_config.validation.schema import YAML_NOT_JSON

from autopilot_cli.client import AutopilotClient
from autopilot_cli.common import (
    EXIT_OK,
    UsageError,
    accepted,
    add_command,
    api_command,
    api_options,
    idempotency_key,
    idempotency_options,
    wait_options,
)
from autopilot_cli.output import Output
from autopilot_cli.views import print_cluster, print_clusters, print_document, print_plan

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers


def add_parsers(subparsers: SubParsers) -> None:
    common, waiting = api_options(), wait_options()
    keyed = idempotency_options()
    clusters = subparsers.add_parser("clusters", help="create, list, inspect and delete clusters")
    actions = clusters.add_subparsers(dest="clusters_command", required=True, metavar="ACTION")

    create = add_command(
        actions, "create", "create a cluster from cluster-config.json", [common, waiting, keyed]
    )
    create.add_argument(
        "--cluster-config",
        required=True,
        type=Path,
        metavar="FILE",
        help="the CreateCluster request, as `aws sagemaker create-cluster --cli-input-json` reads (required)",
    )
    create.add_argument(
        "--provisioning-parameters", type=Path, metavar="FILE", help="Slurm's (default: none)"
    )
    create.add_argument("--owner", required=True, help="the owner cost tag (required)")
    create.add_argument("--project", required=True, help="the project cost tag (required)")
    create.add_argument("--cost-center", help="the cost-center cost tag (default: none)")
    create.add_argument(
        "--budget-usd",
        type=float,
        help="the cluster's monthly budget in USD (default: the stack's DefaultMonthlyBudgetUsd, if any)",
    )
    create.add_argument(
        "--budget-enforcement",
        choices=("alert", "scale-to-min", "block-growth"),
        help="what happens at 100%% of the budget (default: the API's, alert)",
    )
    create.add_argument(
        "--project-budget-usd",
        type=float,
        help="a monthly budget shared by the project's clusters, if the project has none (default: none)",
    )
    create.add_argument(
        "--alert-email",
        action="append",
        help="budget alert e-mail, repeatable (default: none)",
    )
    create.add_argument(
        "--login-target-group",
        action="append",
        metavar="ARN",
        help="an ELBv2 target group (target type ip) to hold the login nodes, repeatable up to 5 "
        "(default: none)",
    )
    create.add_argument(
        "--rollback-on-failure", action="store_true", help="delete the cluster if creation fails"
    )
    create.add_argument(
        "--dry-run",
        action="store_true",
        help="make every check the create makes and print the CreateCluster request, tags and budget "
        "it would use; create nothing",
    )
    create.set_defaults(
        func=api_command(run_create),
        body_flags={
            "owner": "--owner",
            "project": "--project",
            "costCenter": "--cost-center",
            "budget.monthlyLimitUsd": "--budget-usd",
            "budget.enforcement": "--budget-enforcement",
            "budget.projectMonthlyLimitUsd": "--project-budget-usd",
            "budget.alertEmails": "--alert-email",
            "rollbackOnFailure": "--rollback-on-failure",
            "loginTargetGroupArns": "--login-target-group",
            "clusterConfig": "--cluster-config",
            "provisioningParameters": "--provisioning-parameters",
        },
    )

    listing = add_command(actions, "list", "list clusters (filters apply to every page)", [common])
    listing.add_argument("--include-deleted", action="store_true", help="also list deleted clusters")
    listing.add_argument("--owner", help="only this owner's clusters (default: every owner)")
    listing.add_argument("--project", help="only this project's clusters (default: every project)")
    listing.add_argument(
        "--status", type=str.upper, help="only clusters in this status, e.g. ACTIVE (default: any)"
    )
    listing.set_defaults(func=api_command(run_list))

    get = add_command(actions, "get", "describe a cluster: Autopilot's record and SageMaker's", [common])
    get.add_argument("name")
    get.add_argument("--nodes", action="store_true", help="also list its nodes")
    get.set_defaults(func=api_command(run_get))

    delete = add_command(actions, "delete", "delete a cluster", [common, waiting, keyed])
    delete.add_argument("name")
    delete.add_argument(
        "--stack-name",
        help="CloudFormation stack to delete once the cluster is gone (default: none)",
    )
    delete.set_defaults(func=api_command(run_delete))

    unblock = add_command(
        actions,
        "lift-growth-block",
        "let a cluster scale up again before its budget period ends (block-growth enforcement; admins)",
        [common],
    )
    unblock.add_argument("name")
    unblock.set_defaults(func=api_command(run_lift_growth_block))

    scale = add_command(
        actions,
        "scale",
        "set a worker group's instance count (a scale-up is refused while block-growth holds the cluster)",
        [common],
    )
    scale.add_argument("name")
    scale.add_argument("--group", required=True, help="the worker instance group (required)")
    scale.add_argument(
        "--count", required=True, type=int, help="its new instance count, 0 or more (required)"
    )
    scale.set_defaults(func=api_command(run_scale), body_flags={"instanceCount": "--count"})


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text") from exc
    document = load_document(text, str(path))  # as `autopilot validate` reads it (YAML named as such)
    if isinstance(document, Problem):
        if document.message == YAML_NOT_JSON:
            raise UsageError(f"{path} {YAML_NOT_JSON}")
        where = f"{document.path}: " if document.path else ""
        raise UsageError(f"{path} is not JSON: {where}{document.message}")
    return document


def _create_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {
        "clusterConfig": _read_json(args.cluster_config),
        "owner": args.owner,
        "project": args.project,
        "rollbackOnFailure": args.rollback_on_failure,
    }
    if args.provisioning_parameters:
        body["provisioningParameters"] = _read_json(args.provisioning_parameters)
    if args.cost_center:
        body["costCenter"] = args.cost_center
    if args.login_target_group:
        body["loginTargetGroupArns"] = args.login_target_group
    budget = {
        "monthlyLimitUsd": args.budget_usd,
        "enforcement": args.budget_enforcement,
        "projectMonthlyLimitUsd": args.project_budget_usd,
        "alertEmails": args.alert_email,
    }
    if any(value is not None for value in budget.values()):
        body["budget"] = {key: value for key, value in budget.items() if value is not None}
    return body


def run_create(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    if args.dry_run:
        output.result(client.plan_create(_create_body(args)), print_plan)
        return EXIT_OK
    answer = client.create_cluster(_create_body(args), idempotency_key=idempotency_key(args))
    return accepted(client, answer, args, output)


def run_delete(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    answer = client.delete_cluster(
        args.name, stack_name=args.stack_name, idempotency_key=idempotency_key(args)
    )
    return accepted(client, answer, args, output)


def run_list(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    # GET /clusters filters nothing but deleted clusters; the rest is picked here, over every page.
    wanted = {"owner": args.owner, "project": args.project, "status": args.status}
    clusters = [
        cluster
        for cluster in client.list_clusters(include_deleted=args.include_deleted)
        if all(value is None or cluster.get(key) == value for key, value in wanted.items())
    ]
    output.result(clusters, print_clusters)
    return EXIT_OK


def run_get(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    cluster = client.get_cluster(args.name)
    if args.nodes:
        cluster = {**cluster, "nodes": list(client.list_nodes(args.name))}
    output.result(cluster, print_cluster)
    return EXIT_OK


def run_lift_growth_block(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    output.result(client.lift_growth_block(args.name), print_document)
    return EXIT_OK


def run_scale(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    output.result(
        client.scale_instance_group(args.name, args.group, instance_count=args.count), print_document
    )
    return EXIT_OK
