"""``autopilot init``: write a starting cluster-config.json (and Slurm's provisioning_parameters.json).

The files are the repository's examples/ (shipped in the wheel: cli/src/autopilot_cli/examples links
there), so what `init` writes is what the test suite validates. Their account, bucket, subnet, security
group and file-system values are AWS's documentation placeholders; `init` lists where they are.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from autopilot_cli.common import EXIT_OK, UsageError, add_command, guarded, output_options
from autopilot_cli.output import Output

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

EXAMPLES = Path(__file__).resolve().parent / "examples"
ORCHESTRATORS = ("slurm", "eks")
# AWS's documentation placeholders (account 111122223333, ids of 0123456789abcdef0) and the example
# FSx mount name: what a person must replace before a create can succeed.
PLACEHOLDER = re.compile(r"111122223333|0123456789abcdef0|0fedcba9876543210|^abcdefgh$")


def add_parsers(subparsers: SubParsers) -> None:
    parser = add_command(
        subparsers,
        "init",
        "write a starting cluster-config.json (and provisioning_parameters.json for Slurm) to fill in",
        [output_options()],
    )
    parser.add_argument(
        "--orchestrator", choices=ORCHESTRATORS, default="slurm", help="the cluster's orchestrator"
    )
    parser.add_argument(
        "--directory", type=Path, default=Path("."), metavar="DIR", help="where to write the files"
    )
    parser.add_argument("--cluster-name", help="the ClusterName to write (default: the example's)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")
    parser.set_defaults(func=run_init)


def run_init(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    return guarded(args, out, err, lambda output: _init(args, output))


def _init(args: argparse.Namespace, output: Output) -> int:
    sources = sorted((EXAMPLES / args.orchestrator).glob("*.json"))
    targets = [args.directory / source.name for source in sources]
    existing = [str(target) for target in targets if target.exists()]
    if existing and not args.force:
        raise UsageError(f"{', '.join(existing)} exist: pass --force to overwrite")
    args.directory.mkdir(parents=True, exist_ok=True)
    placeholders: list[dict[str, str]] = []
    for source, target in zip(sources, targets, strict=True):
        document = json.loads(source.read_text(encoding="utf-8"))
        if args.cluster_name and "ClusterName" in document:
            document["ClusterName"] = args.cluster_name
        target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        placeholders += [
            {"file": str(target), "path": path, "value": value} for path, value in _placeholders(document)
        ]
    result = {"files": [str(target) for target in targets], "placeholders": placeholders}
    output.result(result, lambda document, out: _view(document, targets, out))
    return EXIT_OK


def _placeholders(document: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _placeholders(value, f"{path}.{key}" if path else key)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _placeholders(value, f"{path}[{index}]")
    elif isinstance(document, str) and PLACEHOLDER.search(document):
        yield path, document


def _view(result: dict[str, Any], targets: list[Path], out: TextIO) -> None:
    for name in result["files"]:
        print(f"wrote {name}", file=out)
    print("replace these example values with your account's:", file=out)
    for place in result["placeholders"]:
        print(f"  {Path(place['file']).name}: {place['path']}: {place['value']}", file=out)
    files = " ".join(
        f"{'--provisioning-parameters' if target.name.startswith('provisioning') else '--cluster-config'} "
        f"{target}"
        for target in targets
    )
    print("then check them against your account, and see what a create would send:", file=out)
    print(f"  autopilot validate --aws {files}", file=out)
    print(f"  autopilot clusters create {files} --owner YOU --project PROJECT --dry-run", file=out)
