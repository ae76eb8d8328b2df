"""AWS::Lambda::LayerVersion: published in moto (placeholder zip); its local directory goes on the
path of every function that lists it."""

from __future__ import annotations

from typing import Any

from ..context import PLACEHOLDER_ZIP, Context, Provider, pick
from ..stack import Resource, TemplateError


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    content = props["Content"]
    if set(content) != {"S3Bucket", "S3Key"}:
        raise TemplateError(f"Content {sorted(content)}: the sandbox deploys a local ContentUri only")
    layer_dir = ctx.local_path(content["S3Bucket"], content["S3Key"], "Content")
    published = ctx.client("lambda").publish_layer_version(
        LayerName=str(props.get("LayerName") or logical_id),
        Content={"ZipFile": PLACEHOLDER_ZIP},
        **pick(props, "Description", "CompatibleRuntimes", "CompatibleArchitectures", "LicenseInfo"),
    )
    arn = str(published["LayerVersionArn"])
    ctx.stack.layers[arn] = layer_dir
    return Resource(logical_id, "AWS::Lambda::LayerVersion", arn, {"LayerVersionArn": arn}, arn)


PROVIDER = Provider(
    "AWS::Lambda::LayerVersion",
    frozenset(
        {
            "LayerName",
            "Content",
            "Description",
            "CompatibleRuntimes",
            "CompatibleArchitectures",
            "LicenseInfo",
        }
    ),
    create,
)
