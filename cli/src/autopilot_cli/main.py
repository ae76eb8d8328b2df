"""The ``autopilot`` command line.

Each command module contributes ``add_parsers(subparsers)``; each command sets ``func``
(``(args, stdout, stderr) -> exit code``, see ``common`` for the codes).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, cast

from autopilot_cli import (
    __version__,
    clusters,
    completion,
    configure,
    healing,
    init,
    nodes,
    operations,
    usage,
    validate,
)
from autopilot_cli.common import EXIT_REJECTED, EXIT_USAGE, Command, HelpFormatter
from autopilot_cli.output import Output

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

# One entry per command module: adding a command group is an import and an entry here.
PARSER_ADDERS: tuple[Callable[[SubParsers], None], ...] = (
    configure.add_parsers,
    init.add_parsers,
    validate.add_parsers,
    clusters.add_parsers,
    nodes.add_parsers,
    operations.add_parsers,
    healing.add_parsers,
    usage.add_parsers,
    completion.add_parsers,
)


class UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(f"{parser.prog}: error: {message}")
        self.usage = parser.format_usage()


class Parser(argparse.ArgumentParser):
    """Raises on a bad command line instead of printing, so main() reports it in the chosen output."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="autopilot",
        description="HyperPod Autopilot: create, follow, heal and delete SageMaker HyperPod clusters "
        "through the Autopilot API.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # `autopilot completion` completes this parser: a default hands it over without an import back.
    parser.set_defaults(root_parser=parser)
    # (a _SubParsersAction[Parser]: every command's parser raises as this one does)
    subparsers = cast("SubParsers", parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    for add_parsers in PARSER_ADDERS:
        add_parsers(subparsers)
    return parser


# Options every API command takes, and whether each takes a value: as with the aws CLI they may come
# before the command (`autopilot --output json clusters list`).
GLOBAL_OPTIONS = {"--output": True, "--format": True, "--query": True, "--endpoint": True, "--region": True}
GLOBAL_OPTIONS |= {"--profile": True, "--debug": False}


def global_options_last(arguments: Sequence[str]) -> list[str]:
    """The command line with the global options that precede the command moved after it (argparse
    reads an option only in the subcommand's parser, which defines it)."""
    rest, moved = list(arguments), []
    while rest and rest[0].split("=", 1)[0] in GLOBAL_OPTIONS:
        takes_value = GLOBAL_OPTIONS[rest[0].split("=", 1)[0]] and "=" not in rest[0]
        count = 2 if takes_value else 1
        moved += rest[:count]
        rest = rest[count:]
    return rest + moved


def leaf_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``args`` chose: its usage is the one to show."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return leaf_parser(action.choices[chosen], args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = global_options_last(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(arguments)
        if unknown:  # argparse would blame the top-level parser; the subcommand's usage helps
            leaf_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # --help and --version: argparse printed them
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except UsageError as exc:
        if _asks_for_json(arguments):
            Output("json", None, sys.stdout, sys.stderr).error("UsageError", str(exc))
        else:
            sys.stderr.write(exc.usage)
            print(exc, file=sys.stderr)
        return EXIT_USAGE
    command: Command = args.func
    try:
        return command(args, sys.stdout, sys.stderr)
    except BrokenPipeError:
        # `autopilot ... | head`: the reader left; no traceback, and no second error at exit when
        # Python flushes the closed stdout (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_REJECTED


def _asks_for_json(arguments: list[str]) -> bool:
    """Whether a command line argparse refused asked for JSON (its errors must parse too)."""
    following = [*arguments[1:], ""]
    return any(
        (flag in ("--output", "--format") and following[index] == "json")
        or flag in ("--output=json", "--format=json")
        for index, flag in enumerate(arguments)
    )
