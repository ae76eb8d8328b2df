"""The SAM transform, done by AWS's own aws-sam-translator (the library behind ``sam build``/``sam deploy``
and CloudFormation's AWS::Serverless-2016-10-31 transform).

Local paths (a function's CodeUri, a layer's ContentUri, a state machine's DefinitionUri) are what
``sam package`` would upload; here they become ``s3://sandbox-local-path/<path>`` placeholders before
the transform, and the resource providers read the local path back from the S3 key.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

import boto3
from samtranslator.metrics.metrics import DummyMetricsPublisher, Metrics  # type: ignore[import-untyped]
from samtranslator.model.exceptions import InvalidDocumentException  # type: ignore[import-untyped]
from samtranslator.parser.parser import Parser  # type: ignore[import-untyped]
from samtranslator.translator.translator import Translator  # type: ignore[import-untyped]

from . import moto_iam
from .intrinsics import partition_for
from .stack import TemplateError
from .template import LANGUAGE_EXTENSIONS

SERVERLESS_TRANSFORM: Final = "AWS::Serverless-2016-10-31"
LOCAL_BUCKET: Final = "sandbox-local-path"
_LOCAL_PATHS: Final = {
    "AWS::Serverless::Function": "CodeUri",
    "AWS::Serverless::LayerVersion": "ContentUri",
    "AWS::Serverless::StateMachine": "DefinitionUri",
}
_HASH_SUFFIX: Final = re.compile(r"[0-9a-f]{10}")


def transform(
    template: Mapping[str, Any],
    parameters: Mapping[str, Any],
    *,
    region: str,
    account_id: str,
    stack_name: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the CloudFormation template, SAM logical id -> the id the transform gave it where it changed)."""
    declared = template.get("Transform")
    transforms = declared if isinstance(declared, list) else [declared] if declared else []
    if not transforms:
        return copy.deepcopy(dict(template)), {}
    if LANGUAGE_EXTENSIONS in transforms:  # load_template expands it and takes it off: never deployed as is
        raise TemplateError(
            f"Transform {LANGUAGE_EXTENSIONS}: not expanded (read the template with load_template)"
        )
    if transforms != [SERVERLESS_TRANSFORM]:
        raise TemplateError(f"Transform: only {SERVERLESS_TRANSFORM} is supported, got {transforms}")
    sam = copy.deepcopy(dict(template))
    _local_paths_to_placeholders(sam)
    partition = partition_for(region)
    values = {
        **parameters,
        "AWS::Region": region,
        "AWS::Partition": partition,
        "AWS::AccountId": account_id,
        "AWS::StackName": stack_name,
    }
    metrics = Metrics("ServerlessTransform", DummyMetricsPublisher())
    translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region), metrics=metrics)
    try:
        translated: dict[str, Any] = translator.translate(
            sam, parameter_values=values, get_managed_policy_map=lambda: moto_iam.policy_map(partition)
        )
    except InvalidDocumentException as error:
        causes = "; ".join(cause.message for cause in error.causes)
        raise TemplateError(f"Transform {SERVERLESS_TRANSFORM}: {causes}") from error
    finally:
        metrics.publish()  # to nowhere; SAM's timers left unpublished warn when the process exits
    return translated, _renamed(template["Resources"], translated["Resources"])


def _local_paths_to_placeholders(sam: dict[str, Any]) -> None:
    global_function = (sam.get("Globals") or {}).get("Function") or {}
    holders = [global_function] if "CodeUri" in global_function else []
    for definition in sam["Resources"].values():
        key = _LOCAL_PATHS.get(definition.get("Type"))
        if key is not None and key in (definition.get("Properties") or {}):
            holders.append(definition["Properties"])
    for properties in holders:
        key = next(k for k in _LOCAL_PATHS.values() if k in properties)
        path = properties[key]
        if isinstance(path, str) and not path.startswith("s3://"):
            properties[key] = f"s3://{LOCAL_BUCKET}/{path}"


def _renamed(sam_resources: Mapping[str, Any], translated: Mapping[str, Any]) -> dict[str, str]:
    """SAM gives a layer the logical id <LogicalId><10 hex digits of its content hash>."""
    return {
        logical_id: new_id
        for logical_id in sam_resources
        if logical_id not in translated
        for new_id in translated
        if new_id.startswith(logical_id) and _HASH_SUFFIX.fullmatch(new_id[len(logical_id) :])
    }
