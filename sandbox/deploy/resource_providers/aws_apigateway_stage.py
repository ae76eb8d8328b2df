"""AWS::ApiGateway::Stage: CreateStage; the local API server serves the API under this stage's name."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names
from ..stack import Resource, TemplateError


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    api = next((spec for spec in ctx.stack.apis.values() if spec.api_id == props["RestApiId"]), None)
    if api is None or api.stage:
        raise TemplateError(
            f"RestApiId {props['RestApiId']}: one stage per RestApi of this template is supported"
        )
    api.stage = str(props["StageName"])
    ctx.client("apigateway").create_stage(
        restApiId=api.api_id,
        stageName=api.stage,
        deploymentId=props["DeploymentId"],
        description=str(props.get("Description", "")),
        tracingEnabled=bool(props.get("TracingEnabled", False)),
    )
    return Resource(logical_id, "AWS::ApiGateway::Stage", api.stage)


PROVIDER = Provider(
    "AWS::ApiGateway::Stage",
    names("RestApiId StageName DeploymentId Description TracingEnabled"),
    create,
    # Access logs record requests; they do not change the answer.
    ignored=frozenset({"AccessLogSetting"}),
)
