"""AWS::ApiGateway::Deployment: CreateDeployment (SAM's also makes the stage named "Stage", as on AWS)."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    args = {"restApiId": props["RestApiId"], "description": str(props.get("Description", ""))}
    if "StageName" in props:
        args["stageName"] = props["StageName"]
    deployment_id = str(ctx.client("apigateway").create_deployment(**args)["id"])
    return Resource(logical_id, "AWS::ApiGateway::Deployment", deployment_id, {"DeploymentId": deployment_id})


PROVIDER = Provider(
    "AWS::ApiGateway::Deployment", frozenset({"RestApiId", "StageName", "Description"}), create
)
