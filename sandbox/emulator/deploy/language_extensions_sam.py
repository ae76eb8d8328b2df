"""AWS::LanguageExtensions expanded by aws-sam-cli's own implementation (samcli/lib/cfn_language_extensions,
the code behind ``sam build``/``sam validate``), run as a program in the SAM CLI's environment (.venv-sam:
its exact boto3 pin cannot share the development one). Reads {"template", "parameters"} as JSON on stdin,
writes the expanded template as JSON on stdout; an invalid template is exit status 2 and the SAM CLI's
message on stderr.

Only the extension itself runs: Fn::ForEach (sam's ForEachProcessor, collections resolved with the given
parameter values), then what a loop leaves literal, by sam's own resolvers: an Fn::FindInMap of plain
strings (a loop's per-item values), an Fn::Sub with no ${} left (a loop's logical id in Fn::GetAtt, as
AWS's examples write it: ``!GetAtt [!Sub "${Name}Queue", Arn]``).
sam-cli's whole pipeline also resolves every other intrinsic in its "partial" mode, and that is lossy where
``sam build`` can afford it (``sam deploy`` uploads the original template): ``!Sub ${Table.Arn}/index``
comes out as the plain string "${Table.Arn}/index". The sandbox deploys the result, so every other
intrinsic is left to its CloudFormation, as the real transform leaves them to the stack's deploy.
"""

from __future__ import annotations

import copy
import importlib
import json
import sys
from typing import Any


def _sam(module: str) -> Any:
    """A module of aws-sam-cli's implementation (imported by name: only .venv-sam has it)."""
    return importlib.import_module(f"samcli.lib.cfn_language_extensions.{module}")


def expand(template: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    models, processors = _sam("models"), _sam("processors")
    context = models.TemplateProcessingContext(
        fragment=copy.deepcopy(template),
        parameter_values=parameters,
        pseudo_parameters=None,
        resolution_mode=models.ResolutionMode.PARTIAL,
    )
    for_each = _sam("processors.foreach").ForEachProcessor(
        intrinsic_resolver=_sam("api").create_default_intrinsic_resolver(context)
    )
    pipeline = _sam("pipeline").ProcessingPipeline([processors.TemplateParsingProcessor(), for_each])
    expanded: dict[str, Any] = pipeline.process_template(context)
    context.fragment = expanded
    literal = _sam("resolvers.base").IntrinsicResolver(context)
    literal.register_resolver(_sam("resolvers.fn_find_in_map").FnFindInMapResolver)
    literal.register_resolver(_sam("resolvers.fn_sub").FnSubResolver)
    for section in ("Resources", "Outputs"):
        if section in expanded:
            expanded[section] = _literal(expanded[section], literal)
    return expanded


def _literal(value: Any, resolver: Any) -> Any:
    """Each Fn::FindInMap of plain strings and each Fn::Sub without ${}, resolved; anything else as is."""
    if isinstance(value, dict):
        name, arguments = next(iter(value.items())) if len(value) == 1 else (None, None)
        if (
            name == "Fn::FindInMap"
            and isinstance(arguments, list)
            and all(isinstance(a, str) for a in arguments)
        ):
            return resolver.resolve_value(value)
        if name == "Fn::Sub" and isinstance(arguments, str) and "${" not in arguments:
            return resolver.resolve_value(value)
        return {key: _literal(item, resolver) for key, item in value.items()}
    if isinstance(value, list):
        return [_literal(item, resolver) for item in value]
    return value


def main() -> int:
    request = json.load(sys.stdin)
    try:
        expanded = expand(request["template"], request["parameters"])
    except _sam("exceptions").InvalidTemplateException as error:
        print(f"AWS::LanguageExtensions: {error}", file=sys.stderr)
        return 2
    json.dump(expanded, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
