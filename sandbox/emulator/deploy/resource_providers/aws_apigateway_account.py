"""AWS::ApiGateway::Account: UpdateAccount with the CloudWatch Logs role API Gateway logs with
(one per account and region; GetAccount shows it)."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    operations = []
    if props.get("CloudWatchRoleArn"):
        operations.append(
            {"op": "replace", "path": "/cloudwatchRoleArn", "value": props["CloudWatchRoleArn"]}
        )
    ctx.client("apigateway").update_account(patchOperations=operations)
    # CloudFormation's physical id of this resource is generated; nothing references it.
    return Resource(logical_id, "AWS::ApiGateway::Account", ctx.physical_name(logical_id))


PROVIDER = Provider("AWS::ApiGateway::Account", names("CloudWatchRoleArn"), create)
