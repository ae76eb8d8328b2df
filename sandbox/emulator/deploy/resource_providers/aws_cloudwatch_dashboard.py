"""AWS::CloudWatch::Dashboard: PutDashboard (the body is the JSON string the template built)."""

from __future__ import annotations

from typing import Any

from ..context import Context, Provider, names
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.get("DashboardName") or ctx.physical_name(logical_id, 255))
    ctx.client("cloudwatch").put_dashboard(DashboardName=name, DashboardBody=str(props["DashboardBody"]))
    # CloudWatch dashboards are global: their ARN has no region.
    arn = f"arn:{ctx.partition}:cloudwatch::{ctx.stack.account_id}:dashboard/{name}"
    return Resource(logical_id, "AWS::CloudWatch::Dashboard", name, {}, arn)


PROVIDER = Provider("AWS::CloudWatch::Dashboard", names("DashboardName DashboardBody"), create)
