"""AWS::Lambda::LayerVersion: published in moto (placeholder zip); its local directory goes on the
path of every function that lists it."""

from __future__ import annotations

from typing import Any

from ..context import PLACEHOLDER_ZIP, Context, Provider, names, pick
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    layer_dir = ctx.local_path(props["Content"], "Content")
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
    names("LayerName Content Description CompatibleRuntimes CompatibleArchitectures LicenseInfo"),
    create,
)
