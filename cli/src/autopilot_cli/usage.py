"""``autopilot usage`` and ``autopilot account-budgets``: what each Slurm account or user spent on a
cluster in a month (chargeback), and the cluster's department budgets.

``usage`` takes a fourth output form besides table, json and text: ``--format csv``, one row per line
of the report with a header, for a spreadsheet (finance's monthly files come from the stack's
UsageExportBucket instead, docs/operations.md "Chargeback")."""

from __future__ import annotations

import argparse
import csv
import re
from typing import TYPE_CHECKING, Any, TextIO

from autopilot_cli.client import AutopilotClient
from autopilot_cli.common import EXIT_OK, add_command, api_command, api_options
from autopilot_cli.output import OUTPUTS, Output, print_table

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

CSV_COLUMNS = ("name", "usd", "gpuHours", "jobs", "percent", "budgetUsd")


def month(value: str) -> str:
    if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a month as YYYY-MM")
    return value


def budget(value: str) -> tuple[str, float]:
    account, _, amount = value.partition("=")
    try:
        usd = float(amount)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not ACCOUNT=USD") from None
    if not account:
        raise argparse.ArgumentTypeError(f"{value!r} is not ACCOUNT=USD")
    return account, usd


def _with_csv(options: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The API options with csv among --output/--format's choices (this parser's own copy)."""
    for action in options._actions:
        if action.dest == "output":
            action.choices = (*OUTPUTS, "csv")
            action.help = "table for people, json, text (tab-separated) or csv (a header, a row per line)"
    return options


def add_parsers(subparsers: SubParsers) -> None:
    usage = add_command(
        subparsers,
        "usage",
        "what each Slurm account or user spent on a cluster in a month, and the capacity nobody used",
        [_with_csv(api_options())],
    )
    usage.add_argument("cluster")
    usage.add_argument("--by", choices=("account", "user"), default="account", help="lines per")
    usage.add_argument("--month", type=month, help="YYYY-MM, UTC (default: the current month)")
    usage.set_defaults(func=api_command(run_usage))

    budgets = add_command(
        subparsers,
        "account-budgets",
        "set a cluster's department budgets (USD a month per Slurm account; all replaced)",
        [api_options()],
    )
    budgets.add_argument("cluster")
    budgets.add_argument(
        "--budget",
        type=budget,
        action="append",
        default=[],
        metavar="ACCOUNT=USD",
        help="one per account (repeat); none removes every budget",
    )
    budgets.set_defaults(func=api_command(run_account_budgets), body_flags={"accountBudgets": "--budget"})


def run_usage(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    report = client.get_usage(args.cluster, by=args.by, month=args.month)
    if output.mode == "csv":
        print_csv(report, output.out)
    else:
        output.result(report, print_usage)
    for warning in report.get("warnings") or []:  # on stderr in every output form
        print(f"warning: {warning}", file=output.err)
    return EXIT_OK


def run_account_budgets(client: AutopilotClient, args: argparse.Namespace, output: Output) -> int:
    answer = client.set_account_budgets(args.cluster, dict(args.budget))
    output.result(answer, print_budgets)
    return EXIT_OK


def _usd(value: Any) -> str:
    return "-" if value is None else f"{value:,.2f}"


def print_usage(report: dict[str, Any], out: TextIO) -> None:
    as_of = report.get("asOf") or "no meter run yet"
    print(
        f"{report['clusterName']} {report['month']} by {report['by']}: {_usd(report['totalUsd'])} USD "
        f"(cluster spend {_usd(report['clusterSpendUsd'])}, as of {as_of})",
        file=out,
    )
    rows = [[report["by"].upper(), "USD", "%", "GPU-HOURS", "JOBS", "BUDGET"]]
    for line in report["lines"]:
        rows.append(
            [
                line["name"],
                _usd(line["usd"]),
                f"{line['percent']:.1f}",
                f"{line['gpuHours']:,.1f}",
                str(line["jobs"]),
                _usd(line.get("budgetUsd")),
            ]
        )
    print_table(rows, out)


def print_csv(report: dict[str, Any], out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["cluster", "month", "by", *CSV_COLUMNS])
    for line in report["lines"]:
        writer.writerow(
            [report["clusterName"], report["month"], report["by"]]
            + ["" if line.get(column) is None else line[column] for column in CSV_COLUMNS]
        )


def print_budgets(answer: dict[str, Any], out: TextIO) -> None:
    budgets = answer.get("accountBudgets") or {}
    if not budgets:
        print(f"{answer['clusterName']}: no department budgets", file=out)
        return
    print_table([["ACCOUNT", "USD A MONTH"], *([a, _usd(v)] for a, v in sorted(budgets.items()))], out)
