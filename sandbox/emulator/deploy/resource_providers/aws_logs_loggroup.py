"""AWS::Logs::LogGroup: CreateLogGroup and its retention."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names, tags_map
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.get("LogGroupName") or ctx.physical_name(logical_id, 512))
    args: dict[str, Any] = {"logGroupName": name}
    if props.get("KmsKeyId"):
        args["kmsKeyId"] = str(props["KmsKeyId"])
    if props.get("Tags"):
        args["tags"] = tags_map(props["Tags"])
    logs = ctx.client("logs")
    logs.create_log_group(**args)
    if props.get("RetentionInDays"):
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(props["RetentionInDays"]))
    arn = ctx.arn("logs", f"log-group:{name}:*")
    return Resource(logical_id, "AWS::Logs::LogGroup", name, {"Arn": arn}, arn)


PROVIDER = Provider(
    "AWS::Logs::LogGroup",
    names("LogGroupName RetentionInDays KmsKeyId Tags"),
    create,
    # Masking and the Infrequent Access class change what logs cost and show, not what the code does.
    ignored=frozenset({"DataProtectionPolicy", "LogGroupClass"}),
)
