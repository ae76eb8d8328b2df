"""AWS::DynamoDB::Table: CreateTable, then TTL and point-in-time recovery as CloudFormation applies them."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names, pick, tags_list
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.get("TableName") or ctx.physical_name(logical_id, 255))
    args: dict[str, Any] = {
        "TableName": name,
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
        **pick(
            props,
            "AttributeDefinitions",
            "KeySchema",
            "ProvisionedThroughput",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "TableClass",
            "DeletionProtectionEnabled",
        ),
    }
    if props.get("StreamSpecification"):
        args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    if "SSESpecification" in props:
        sse = props["SSESpecification"]
        args["SSESpecification"] = {
            "Enabled": sse.get("SSEEnabled", False),
            **pick(sse, "SSEType", "KMSMasterKeyId"),
        }
    if props.get("Tags"):
        args["Tags"] = tags_list(props["Tags"])
    dynamodb = ctx.client("dynamodb")
    table = dynamodb.create_table(**args)["TableDescription"]
    if "TimeToLiveSpecification" in props:
        dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=props["TimeToLiveSpecification"])
    if "PointInTimeRecoverySpecification" in props:
        dynamodb.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification=props["PointInTimeRecoverySpecification"]
        )
    attributes = {
        "Arn": table["TableArn"],
        **({"StreamArn": table["LatestStreamArn"]} if "LatestStreamArn" in table else {}),
    }
    return Resource(logical_id, "AWS::DynamoDB::Table", name, attributes, table["TableArn"])


PROVIDER = Provider(
    "AWS::DynamoDB::Table",
    names(
        "TableName AttributeDefinitions KeySchema BillingMode ProvisionedThroughput"
        " GlobalSecondaryIndexes LocalSecondaryIndexes StreamSpecification SSESpecification"
        " TimeToLiveSpecification PointInTimeRecoverySpecification Tags TableClass"
        " DeletionProtectionEnabled"
    ),
    create,
    # Metrics insight and capacity pre-warming: no effect on what a call returns.
    ignored=frozenset({"ContributorInsightsSpecification", "WarmThroughput"}),
)
