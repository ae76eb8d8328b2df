"""AWS::Lambda::Function: created in moto's Lambda with a placeholder zip (so its ARN exists for Step
Functions, EventBridge, SNS and SQS); the in-process runtime runs the local code (a FunctionSpec)."""

from __future__ import annotations

import json
from typing import Any, Final

from botocore.exceptions import ClientError

from ..context import PLACEHOLDER_ZIP, Context, Provider, names, pick, stringify, tags_map
from ..stack import FunctionSpec, Resource, TemplateError

# Lambda's quota: "4 KB" for all of a function's environment variables. AWS measures the variables as
# the JSON its error message quotes ("String measured: {...}"), so the sandbox measures that string.
ENVIRONMENT_LIMIT_BYTES: Final = 4096


def check_environment_size(variables: dict[str, str]) -> None:
    """CreateFunction's answer to variables over 4 KB (CloudFormation reports it as CREATE_FAILED)."""
    measured = json.dumps(variables, separators=(",", ":"), ensure_ascii=False)
    if len(measured.encode()) > ENVIRONMENT_LIMIT_BYTES:
        message = (
            "Lambda was unable to configure your environment variables because the environment variables"
            f" you have provided exceeded the 4KB limit. String measured: {measured}"
        )
        raise ClientError(
            {"Error": {"Code": "InvalidParameterValueException", "Message": message}}, "CreateFunction"
        )


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    if props.get("PackageType", "Zip") != "Zip":
        raise TemplateError("PackageType Image is not supported (the sandbox runs Zip functions in-process)")
    code_dir = ctx.local_path(props["Code"], "Code")
    handler = str(props["Handler"])
    module = handler.rpartition(".")[0].replace(".", "/")
    if not (code_dir / f"{module}.py").is_file() and not (code_dir / module / "__init__.py").is_file():
        raise TemplateError(f"handler module {module}.py not found in {code_dir}")
    name = str(props.get("FunctionName") or ctx.physical_name(logical_id))
    layers = [str(arn) for arn in props.get("Layers") or []]
    external = [arn for arn in layers if arn not in ctx.stack.layers]
    variables = {
        str(k): stringify(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()
    }
    check_environment_size(variables)
    reserved = props.get("ReservedConcurrentExecutions")
    args = {
        **pick(props, "Runtime", "Role", "Description", "DeadLetterConfig", "TracingConfig", "Architectures"),
        **pick(props, "EphemeralStorage", "LoggingConfig", "KmsKeyArn", "PackageType"),
        "FunctionName": name,
        "Handler": handler,
        "Code": {"ZipFile": PLACEHOLDER_ZIP},
        "Timeout": int(props.get("Timeout", 3)),
        "MemorySize": int(props.get("MemorySize", 128)),
        "Environment": {"Variables": variables},
        "Tags": tags_map(props.get("Tags")),
    }
    if layers and not external:  # moto cannot resolve layers published elsewhere
        args["Layers"] = layers
    client = ctx.client("lambda")
    arn = str(client.create_function(**args)["FunctionArn"])
    if reserved is not None:
        client.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=int(reserved))
    dead_letter = (props.get("DeadLetterConfig") or {}).get("TargetArn")
    ctx.stack.functions[logical_id] = FunctionSpec(
        logical_id=logical_id,
        name=name,
        arn=arn,
        handler=handler,
        runtime=str(props["Runtime"]),
        code_dir=code_dir,
        layer_dirs=[ctx.stack.layers[arn] for arn in layers if arn in ctx.stack.layers],
        environment=variables,
        timeout=args["Timeout"],
        memory_size=args["MemorySize"],
        dead_letter_arn=str(dead_letter) if dead_letter else None,
        reserved_concurrency=None if reserved is None else int(reserved),
        external_layers=external,
        log_group_name=(props.get("LoggingConfig") or {}).get("LogGroup"),
    )
    return Resource(logical_id, "AWS::Lambda::Function", name, {"Arn": arn}, arn)


PROVIDER = Provider(
    "AWS::Lambda::Function",
    names(
        "Code Handler Runtime Role FunctionName Description Timeout MemorySize Environment Layers"
        " DeadLetterConfig Tags TracingConfig Architectures EphemeralStorage LoggingConfig KmsKeyArn"
        " PackageType ReservedConcurrentExecutions"
    ),
    create,
)
