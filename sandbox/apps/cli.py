"""The sandbox command line: ``python -m sandbox up | invoke | inject | demo``.

- ``up``: deploy the template into the embedded AWS, serve the API (SigV4) and an AWS endpoint
  (moto server + the simulators) on 127.0.0.1, print the URLs and credentials, run until
  SIGINT/SIGTERM. ``aws --endpoint-url <aws-url> sagemaker list-clusters`` sees the simulated fleet.
  Everything lives in the process's memory: stopping it forgets every resource.
- ``invoke <LogicalId> --event FILE``: like ``sam local invoke``; prints the result JSON, exit 1 on
  a function error.
- ``inject <fault> [--param k=v …]``: POST /_sandbox/faults on a running sandbox's AWS endpoint
  (moto's server app is wrapped: /_sandbox/* is the admin API, everything else is AWS).
- ``demo …``: the scripted scenarios, dispatched to ``sandbox.apps.demo.main(argv)`` (sandbox/apps/demo/).

The sandbox's own region (the stack's, the REST API's): ``--region``, else ``AWS_REGION`` /
``AWS_DEFAULT_REGION`` (in the AWS CLI's order), else the ``region`` that ``sam deploy`` would read
from samconfig.toml next to the template, else us-east-1 (:func:`resolve_region`).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import io
import json
import os
import re
import signal
import sys
import threading
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import requests

from sandbox.emulator.aws_calls.faults import KINDS as FAULT_KINDS
from sandbox.emulator.lambda_runtime import SANDBOX_CREDENTIALS
from sandbox.harness.core import DEFAULT_REGION, DEFAULT_TEMPLATE, Sandbox
from sandbox.services.hyperpod.simulator import HyperPodSimulator

SAMCONFIG = "samconfig.toml"
# Where `sam deploy` (environment "default") finds its region: its own section, then the global one.
_SAMCONFIG_SECTIONS = (("default", "deploy", "parameters"), ("default", "global", "parameters"))


def resolve_region(
    flag: str | None, template: Path, environ: Mapping[str, str] = os.environ
) -> tuple[str, str]:
    """The sandbox's region and where it came from (shown by ``up``)."""
    if flag:
        return flag, "--region"
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if environ.get(variable):
            return environ[variable], variable
    samconfig = template.resolve().parent / SAMCONFIG
    if not samconfig.is_file():
        return DEFAULT_REGION, "default"
    config = tomllib.loads(samconfig.read_text(encoding="utf-8"))
    for section in _SAMCONFIG_SECTIONS:
        table: Any = config
        for name in section:
            table = table.get(name, {}) if isinstance(table, dict) else {}
        region = table.get("region") if isinstance(table, dict) else None
        if isinstance(region, str) and region:
            return region, f"{samconfig} [{'.'.join(section)}]"
    return DEFAULT_REGION, f"default ({samconfig} names no region)"


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox", description="HyperPod Autopilot on an embedded AWS"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE, help="SAM template")
        sub.add_argument(
            "--parameter",
            "-p",
            action="append",
            type=_key_value,
            default=[],
            metavar="NAME=VALUE",
            help="template parameter override (repeatable)",
        )
        sub.add_argument("--speed", type=float, default=600.0, help="simulated seconds per wall second")
        sub.add_argument(
            "--region",
            help=f"the sandbox's region (else AWS_REGION, AWS_DEFAULT_REGION, {SAMCONFIG}, {DEFAULT_REGION})",
        )

    up = commands.add_parser(
        "up",
        help="serve the API and an AWS endpoint until stopped",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    common(up)
    up.add_argument("--api-port", type=int, default=3000, help="the API's port on 127.0.0.1")
    up.add_argument("--aws-port", type=int, default=5000, help="the AWS endpoint's port on 127.0.0.1")
    up.add_argument(
        "--verbose",
        action="store_true",
        help="print every function log line and API request on the console (else warnings, errors and "
        "changes only; everything goes to --log either way)",
    )
    up.add_argument("--log", type=Path, default=Path("build/sandbox.log"), help="the whole log")
    up.add_argument(
        "--duplicate-events",
        type=float,
        default=0.0,
        metavar="RATE",
        help="share (0-1) of HyperPod events delivered twice, as EventBridge may",
    )
    up.add_argument(
        "--no-slurm",
        dest="slurm",
        action="store_false",
        help="no real Slurm (slurmctld / slurmd per Slurm cluster, the agent where installed; `make slurm`)",
    )

    invoke = commands.add_parser(
        "invoke",
        help="invoke one function, like `sam local invoke`, in a sandbox of its own (not a running one)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    common(invoke)
    invoke.add_argument("function", metavar="LogicalId")
    invoke.add_argument("--event", "-e", type=Path, help="event JSON file ('-' for stdin; default {})")

    inject = commands.add_parser(
        "inject",
        help="inject a fault (on any AWS call, or a HyperPod one) into a running sandbox",
        epilog=_fault_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inject.add_argument("fault")
    inject.add_argument(
        "--param",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="fault parameter (value parsed as JSON when it is JSON)",
    )
    inject.add_argument(
        "--aws-url",
        default="http://127.0.0.1:5000",
        help="the running sandbox's AWS endpoint (default: %(default)s)",
    )

    demo = commands.add_parser("demo", help="run the scripted scenarios (sandbox/apps/demo/)", add_help=False)
    demo.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _fault_help() -> str:
    """The faults `inject` knows, with their parameters and defaults, from the code that applies them."""
    lines = [
        "faults on any AWS call the control plane makes (rate required; services, operations, seed,",
        "times, external optional):",
        f"  {', '.join(FAULT_KINDS)}  (latency: ms, clock=wall|simulated; lost_response:",
        "  answer=server_error|timeout: the call takes effect, the caller gets an error)",
        "HyperPod faults:",
    ]
    for name, method in sorted(inspect.getmembers(HyperPodSimulator, inspect.isfunction)):
        if name.startswith("fault_"):
            parameters = list(inspect.signature(method).parameters.values())[1:]
            shown = [p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in parameters]
            summary = " ".join((inspect.getdoc(method) or "").split("\n\n", 1)[0].split())
            lines += [f"  {name.removeprefix('fault_')} {' '.join(shown)}", f"      {summary}"]
    lines += [
        "  clear  disarm every fault",
        "example: python -m sandbox inject node_unhealthy --param cluster=ml-cluster",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "demo":
        return _demo(args_list[1:])
    args = _parser().parse_args(args_list)
    if args.command == "up":
        return _up(args)
    if args.command == "invoke":
        return _invoke(args)
    return _inject(args)


def _sandbox(args: argparse.Namespace, region: str, **options: Any) -> Sandbox:
    return Sandbox(args.template, parameters=dict(args.parameter), speed=args.speed, region=region, **options)


class QuietConsole(io.TextIOBase):
    """The console of ``up``: every line to the log file, and to the console only what a person
    watching needs — not the functions' INFO lines and metrics (a sweep a minute says "done" on every
    cluster) nor the API's successful GETs (a ``--wait`` polls twice every few seconds)."""

    def __init__(self, console: TextIO, log: TextIO, *, verbose: bool) -> None:
        self.console, self.log, self.verbose = console, log, verbose
        self._partial = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self.log.write(text)
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
            for line in lines:
                if self.verbose or not quiet(line):
                    self.console.write(line + "\n")
            self.console.flush()
            self.log.flush()
        return len(text)

    def flush(self) -> None:
        self.console.flush()
        self.log.flush()


_QUIET_API = re.compile(r'^\[api\] \S+ "(GET|HEAD) [^"]*" [23]\d\d ')


def quiet(line: str) -> bool:
    """Whether ``up`` keeps ``line`` off the console by default."""
    if _QUIET_API.match(line):
        return True
    if not line.startswith("{"):
        return False
    try:
        record = json.loads(line)
    except ValueError:
        return False
    if not isinstance(record, dict):
        return False
    return "_aws" in record or record.get("level") in ("DEBUG", "INFO")


def _up(args: argparse.Namespace) -> int:
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("w", encoding="utf-8") as log:
        console_out, console_err = sys.stdout, sys.stderr
        sys.stdout = QuietConsole(console_out, log, verbose=args.verbose)
        sys.stderr = QuietConsole(console_err, log, verbose=args.verbose)
        try:
            return _serve(args)
        finally:
            sys.stdout, sys.stderr = console_out, console_err


def _serve(args: argparse.Namespace) -> int:
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # resolved before the sandbox starts: it sets AWS_REGION in this process to what it runs in
        region, region_source = resolve_region(args.region, args.template)
        with _sandbox(args, region, duplicate_events=args.duplicate_events, slurm=args.slurm) as sandbox:
            api_url = sandbox.serve_api(args.api_port)
            aws_url = sandbox.serve_aws(args.aws_port)
            announce_stack(sandbox, api_url)
            print(
                f"HyperPod Autopilot sandbox: stack {sandbox.stack.name} in {sandbox.region} "
                f"(clock x{sandbox.clock.speed:g})"
            )
            print(f"  region: {sandbox.region} (from {region_source}); other regions are simulated too")
            print("  state lives in this process's memory: it is gone when the sandbox stops")
            print(f"  API (SigV4, service execute-api): {api_url}")
            for api in sandbox.stack.apis.values():
                for route in api.routes:
                    print(f"    {route.method:6} {route.path}  -> {route.function_logical_id} [{route.auth}]")
            print(f"  AWS endpoint:                     {aws_url}   (admin: {aws_url}/_sandbox/health)")
            print("  credentials:")
            for key, value in SANDBOX_CREDENTIALS.items():
                print(f"    export {key}={value}")
            print(f"    export AWS_DEFAULT_REGION={sandbox.region}")
            print(f"  e.g. aws --endpoint-url {aws_url} sagemaker list-clusters")
            print(f"  the CLI: AWS_ENDPOINT_URL={aws_url} autopilot configure --stack {sandbox.stack.name}")
            if sandbox.slurm is not None:
                print(
                    f"  Slurm: real, per Slurm cluster: curl {aws_url}/_sandbox/slurm/<cluster> gives its "
                    "slurmConf; SLURM_CONF=<slurmConf> sinfo"
                )
            shown = (
                "everything (--verbose)" if args.verbose else f"warnings, errors, changes; all in {args.log}"
            )
            print(f"  console: {shown}")
            print("Ctrl-C to stop.", flush=True)
            stopping.wait()
            print("stopping…", flush=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def announce_stack(sandbox: Sandbox, api_url: str) -> None:
    """The deployed stack as CloudFormation describes it, outputs included (``ApiUrl`` the local API's
    URL), so whatever reads a stack's outputs (``autopilot configure --stack``) works against the
    sandbox's AWS endpoint. Its one resource is a placeholder: the sandbox deployed the real ones."""
    outputs = {**sandbox.stack.outputs, "ApiUrl": api_url}
    template = {
        "Resources": {"Deployed": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": str(value)} for key, value in outputs.items()},
    }
    with warnings.catch_warnings():  # moto only notes that it does not model the placeholder
        warnings.simplefilter("ignore", UserWarning)
        sandbox.client("cloudformation").create_stack(
            StackName=sandbox.stack.name, TemplateBody=json.dumps(template)
        )


def _invoke(args: argparse.Namespace) -> int:
    if args.event is None:
        event: Any = {}
    elif str(args.event) == "-":
        event = json.load(sys.stdin)
    else:
        event = json.loads(args.event.read_text(encoding="utf-8"))
    region, _ = resolve_region(args.region, args.template)
    # its own sandbox, started for this one call: a running `up` is not the one invoked (say so)
    print("invoke: starting a sandbox of its own for this call (a running `up` is not used)", file=sys.stderr)
    with _sandbox(args, region, background=False) as sandbox:
        if args.function not in sandbox.stack.functions:
            known = ", ".join(sorted(sandbox.stack.functions)) or "none"
            print(
                f"error: {args.function} is not a function of the template (functions: {known})",
                file=sys.stderr,
            )
            return 2
        result = sandbox.invoke(args.function, event)
        print(json.dumps(result.json(), indent=2))
        return 0 if result.ok else 1


def _inject(args: argparse.Namespace) -> int:
    url = f"{args.aws_url.rstrip('/')}/_sandbox/faults"
    try:
        response = requests.post(url, json={"fault": args.fault, "params": dict(args.param)}, timeout=30)
    except requests.RequestException as error:
        print(
            f"error: no sandbox at {args.aws_url} ({error}); start one with `python -m sandbox up`",
            file=sys.stderr,
        )
        return 2
    print(json.dumps(response.json(), indent=2))
    return 0 if response.ok else 1


def _demo(argv: list[str]) -> int:
    """Scenarios live in sandbox/apps/demo/ (another module); this is only the dispatch."""
    try:
        demo = importlib.import_module("sandbox.apps.demo")
    except ModuleNotFoundError as error:
        if error.name not in ("sandbox.apps.demo",):
            raise
        print("error: no demo scenarios yet (sandbox/apps/demo/ is not present)", file=sys.stderr)
        return 2
    return int(demo.main(argv) or 0)
