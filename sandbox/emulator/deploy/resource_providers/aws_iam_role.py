"""AWS::IAM::Role: CreateRole, an inline policy per ``Policies`` entry (PutRolePolicy) and every managed
policy attached (AWS managed ones are added to moto's IAM first), so the role carries exactly what
CloudFormation would give it."""

from __future__ import annotations

import json
from typing import Any

from .. import moto_iam
from ..context import Context, Provider, names, pick, tags_list
from ..stack import Resource


def create(ctx: Context, logical_id: str, props: dict[str, Any]) -> Resource:
    name = str(props.get("RoleName") or ctx.physical_name(logical_id))
    args = {
        "RoleName": name,
        "AssumeRolePolicyDocument": json.dumps(props["AssumeRolePolicyDocument"]),
        "Tags": tags_list(props.get("Tags")),
        **pick(props, "Path", "Description", "MaxSessionDuration", "PermissionsBoundary"),
    }
    iam = ctx.client("iam")
    if args.get("PermissionsBoundary"):
        # IAM refuses a boundary policy that does not exist (NoSuchEntity); moto would take any ARN
        boundary = str(args["PermissionsBoundary"])
        moto_iam.add_aws_managed_policies(ctx.stack.account_id, ctx.partition, [boundary])
        iam.get_policy(PolicyArn=boundary)
    role = iam.create_role(**args)["Role"]
    with moto_iam.versionless_policies_accepted():
        for policy in props.get("Policies") or []:
            document = json.dumps(policy["PolicyDocument"])
            iam.put_role_policy(RoleName=name, PolicyName=policy["PolicyName"], PolicyDocument=document)
    arns = [str(arn) for arn in props.get("ManagedPolicyArns") or []]
    moto_iam.add_aws_managed_policies(ctx.stack.account_id, ctx.partition, arns)
    for arn in arns:
        iam.attach_role_policy(RoleName=name, PolicyArn=arn)
    return Resource(
        logical_id, "AWS::IAM::Role", name, {"Arn": role["Arn"], "RoleId": role["RoleId"]}, role["Arn"]
    )


PROVIDER = Provider(
    "AWS::IAM::Role",
    names(
        "RoleName AssumeRolePolicyDocument Path Policies ManagedPolicyArns Description MaxSessionDuration"
        " PermissionsBoundary Tags"
    ),
    create,
)
