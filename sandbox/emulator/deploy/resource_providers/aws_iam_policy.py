"""AWS::IAM::Policy: an inline policy of ``PolicyName`` on each of ``Roles`` (PutRolePolicy), as
CloudFormation puts it (the template's conditional ApiCallerChecksPolicy, ApiPreflightPolicy and
CreateClusterEksAccess). Users and groups are not supported: the template attaches to roles only."""

from __future__ import annotations

import json
from typing import Any

from .. import moto_iam
from ..context import Context, Provider
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    iam = ctx.client("iam")
    document = json.dumps(props["PolicyDocument"])
    with moto_iam.versionless_policies_accepted():
        for role in props["Roles"]:
            iam.put_role_policy(
                RoleName=str(role), PolicyName=str(props["PolicyName"]), PolicyDocument=document
            )
    # CloudFormation's physical id of an AWS::IAM::Policy is a generated id, not the policy's name
    return Resource(logical_id, "AWS::IAM::Policy", ctx.physical_name(logical_id), {"Id": logical_id})


PROVIDER = Provider("AWS::IAM::Policy", frozenset({"PolicyName", "PolicyDocument", "Roles"}), create)
