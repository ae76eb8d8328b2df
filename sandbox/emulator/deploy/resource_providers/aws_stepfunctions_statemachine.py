"""AWS::StepFunctions::StateMachine: the definition with its DefinitionSubstitutions applied, as
CloudFormation applies them; a ``${name}`` without a substitution is an error, not a literal."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from ..context import Context, Provider, names, stringify, tags_list
from ..stack import Resource, TemplateError

_UNSUBSTITUTED: Final = re.compile(r"\$\{([^}]+)\}")


def _definition(ctx: Context, props: dict[str, Any]) -> str:
    if "DefinitionString" in props:
        return str(props["DefinitionString"])
    if "Definition" in props:
        return json.dumps(props["Definition"])
    return ctx.local_path(props["DefinitionS3Location"], "DefinitionS3Location").read_text(encoding="utf-8")


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    text = _definition(ctx, props)
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        text = text.replace("${" + key + "}", json.dumps(stringify(value))[1:-1])
    missing = sorted(set(_UNSUBSTITUTED.findall(text)))
    if missing:
        raise TemplateError(
            f"definition uses ${{...}} without a DefinitionSubstitutions entry: {', '.join(missing)}"
        )
    name = str(props.get("StateMachineName") or ctx.physical_name(logical_id, 80))
    args: dict[str, Any] = {
        "name": name,
        "definition": text,
        "roleArn": props["RoleArn"],
        "type": props.get("StateMachineType", "STANDARD"),
        "tags": [{"key": t["Key"], "value": t["Value"]} for t in tags_list(props.get("Tags"))],
    }
    if "TracingConfiguration" in props:
        args["tracingConfiguration"] = {"enabled": bool(props["TracingConfiguration"].get("Enabled"))}
    arn = str(ctx.client("stepfunctions").create_state_machine(**args)["stateMachineArn"])
    return Resource(logical_id, "AWS::StepFunctions::StateMachine", arn, {"Arn": arn, "Name": name}, arn)


PROVIDER = Provider(
    "AWS::StepFunctions::StateMachine",
    names(
        "DefinitionString Definition DefinitionS3Location DefinitionSubstitutions RoleArn"
        " StateMachineName StateMachineType Tags TracingConfiguration"
    ),
    create,
    # Execution logs go to CloudWatch Logs; they change what is recorded, not how executions run.
    ignored=frozenset({"LoggingConfiguration"}),
)
