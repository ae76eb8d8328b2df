"""``autopilot configure``: save the API's endpoint (from the stack's ``ApiUrl`` output) so later
commands need no ``--endpoint``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

from botocore.exceptions import ClientError as AwsError
from botocore.session import Session as BotocoreSession

from autopilot_cli.client import region_from_endpoint
from autopilot_cli.common import (
    EXIT_OK,
    EXIT_REJECTED,
    UsageError,
    add_command,
    endpoint_url,
    guarded,
    output_options,
    region_name,
)
from autopilot_cli.config import Config, config_path, save_config
from autopilot_cli.output import Output, print_fields

if TYPE_CHECKING:
    from autopilot_cli.common import SubParsers

API_URL_OUTPUT = "ApiUrl"  # template.yaml Outputs


def add_parsers(subparsers: SubParsers) -> None:
    configure = add_command(
        subparsers, "configure", "save the API endpoint for later commands", [output_options()]
    )
    configure.description = (
        f"Save the API endpoint in {config_path()} (the file $AUTOPILOT_CONFIG names, when set); "
        "--endpoint and $AUTOPILOT_ENDPOINT still win over it."
    )
    source = configure.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--stack",
        metavar="NAME",
        help=f"read the endpoint from this stack's {API_URL_OUTPUT} output "
        "(default: none; this or --endpoint)",
    )
    source.add_argument(
        "--endpoint",
        metavar="URL",
        type=endpoint_url,
        help="save this endpoint (an http(s) URL; default: none)",
    )
    configure.add_argument(
        "--region", type=region_name, help="the stack's region (default: the AWS profile's)"
    )
    configure.add_argument(
        "--profile",
        help="the AWS profile to read the stack with (default: $AWS_PROFILE, else the default chain)",
    )
    configure.set_defaults(func=run_configure)


def cloudformation(session: BotocoreSession, region: str) -> Any:
    return session.create_client("cloudformation", region_name=region)


def run_configure(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    def configure(output: Output) -> int:
        if args.endpoint:
            config = Config(endpoint=args.endpoint, region=args.region or region_from_endpoint(args.endpoint))
        else:
            session = BotocoreSession(profile=args.profile)
            region = args.region or session.get_config_variable("region")
            if not region:
                raise UsageError("no region: pass --region or configure the AWS profile's region")
            try:
                endpoint = stack_api_url(cloudformation(session, region), args.stack)
            except AwsError as exc:
                error = exc.response.get("Error", {})
                output.error(
                    str(error.get("Code")), f"cannot read stack {args.stack}: {error.get('Message')}"
                )
                return EXIT_REJECTED
            if endpoint is None:
                output.error(
                    "NoApiUrl",
                    f"stack {args.stack} has no {API_URL_OUTPUT} output: is it an Autopilot stack?",
                )
                return EXIT_REJECTED
            config = Config(endpoint=endpoint, region=region, stack=args.stack)
        path = save_config(config)
        output.result({"configFile": str(path), **asdict(config)}, _saved_view)
        return EXIT_OK

    return guarded(args, out, err, configure)


def stack_api_url(client: Any, stack: str) -> str | None:
    [found] = client.describe_stacks(StackName=stack)["Stacks"]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in found.get("Outputs") or []}
    return outputs.get(API_URL_OUTPUT)


def _saved_view(saved: dict[str, Any], out: TextIO) -> None:
    print_fields([(key, saved[key]) for key in ("endpoint", "region", "stack", "configFile")], out)
