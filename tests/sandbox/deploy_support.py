"""What test_deploy.py and test_deploy_real.py share: a role's policy documents as moto's IAM holds them."""

from __future__ import annotations

from typing import Any

from sandbox.harness.core import Sandbox


def _role_documents(sandbox: Sandbox, logical_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(inline policy documents, attached managed policy documents) of a role, read from moto's IAM."""
    iam = sandbox.client("iam")
    role = sandbox.stack.physical_id(logical_id)
    inline = [
        iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]
    ]
    managed = []
    for attached in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:
        policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
        version = iam.get_policy_version(
            PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"]
        )
        managed.append({"Arn": attached["PolicyArn"], **version["PolicyVersion"]["Document"]})
    return inline, managed
