"""``autopilot completion bash``: a bash (and zsh, through bashcompinit) completion script for the
commands, actions and options, made from the parser itself so it never goes stale."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from autopilot_cli.common import EXIT_OK, add_command

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

# The path of words typed so far (only words that name a command) picks the candidates.
SCRIPT = """# autopilot completion: eval "$(autopilot completion bash)"
# (zsh: autoload -U +X bashcompinit && bashcompinit first)
declare -A _autopilot_words=(
{table}
)
_autopilot() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="autopilot" word
  for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
    [[ -n "${{_autopilot_words[$path $word]+x}}" ]] && path="$path $word"
  done
  COMPREPLY=($(compgen -W "${{_autopilot_words[$path]}}" -- "$cur"))
}}
complete -o default -F _autopilot autopilot
"""


def add_parsers(subparsers: SubParsers) -> None:
    parser = add_command(subparsers, "completion", "print a shell completion script (bash, zsh)")
    parser.add_argument("shell", choices=("bash", "zsh"))
    parser.set_defaults(func=run_completion)


def run_completion(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    # The whole command line's parser, handed over by main (which imports this module) as a default.
    root: argparse.ArgumentParser = args.root_parser
    table = "\n".join(
        f"  [{shlex.quote(path)}]={shlex.quote(' '.join(words))}" for path, words in _words(root, "autopilot")
    )
    out.write(SCRIPT.format(table=table))
    return EXIT_OK


def _words(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, list[str]]]:
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    commands: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                commands.append(name)
                yield from _words(child, f"{path} {name}")
    yield path, commands + options
