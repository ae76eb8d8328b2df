"""SimulatePrincipalPolicy in moto (sandbox/emulator/iam_simulation.py) and S3's ExpectedBucketOwner
(sandbox/emulator/s3_bucket_owner.py): answered as IAM and S3 answer them, from the policy evaluation the
sandbox enforces IAM with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator import iam_simulation, s3_bucket_owner

ACCOUNT = "123456789012"
TARGET = f"arn:aws:iam::{ACCOUNT}:role/team-hyperpod-role"
PASS_ROLE = {
    "Effect": "Allow",
    "Action": "iam:PassRole",
    "Resource": "arn:aws:iam::*:role/*hyperpod*",
    "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
}
TO_SAGEMAKER = [
    {
        "ContextKeyName": "iam:PassedToService",
        "ContextKeyValues": ["sagemaker.amazonaws.com"],
        "ContextKeyType": "string",
    }
]


@pytest.fixture
def iam() -> Iterator[Any]:
    with mock_aws():
        iam_simulation.install()
        s3_bucket_owner.install()
        try:
            yield boto3.client("iam", region_name="us-east-1")
        finally:
            s3_bucket_owner.uninstall()
            iam_simulation.uninstall()


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def decision(iam: Any, source: str, resources: list[str] | None = None, context: Any = None) -> str:
    result = iam.simulate_principal_policy(
        PolicySourceArn=source,
        ActionNames=["iam:PassRole"],
        ResourceArns=resources or [TARGET],
        ContextEntries=TO_SAGEMAKER if context is None else context,
    )["EvaluationResults"]
    [only] = result
    return str(only["EvalDecision"])


def test_a_roles_policies_within_its_boundary_decide(iam: Any) -> None:
    arn = iam.create_role(RoleName="Ops", Path="/teams/", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    assert decision(iam, arn) == "implicitDeny"
    iam.put_role_policy(RoleName="Ops", PolicyName="pass", PolicyDocument=policy(PASS_ROLE))
    assert decision(iam, arn) == "allowed"
    assert decision(iam, arn, context=[]) == "implicitDeny"  # the condition's key is missing
    boundary = iam.create_policy(
        PolicyName="boundary", PolicyDocument=policy({**PASS_ROLE, "Resource": "arn:aws:iam::*:role/other-*"})
    )
    iam.put_role_permissions_boundary(RoleName="Ops", PermissionsBoundary=boundary["Policy"]["Arn"])
    assert decision(iam, arn) == "implicitDeny"
    iam.delete_role_permissions_boundary(RoleName="Ops")
    iam.put_role_policy(
        RoleName="Ops", PolicyName="deny", PolicyDocument=policy({**PASS_ROLE, "Effect": "Deny"})
    )
    assert decision(iam, arn) == "explicitDeny"


def test_a_users_own_and_its_groups_policies_decide(iam: Any) -> None:
    arn = iam.create_user(UserName="alice", Path="/people/")["User"]["Arn"]
    assert decision(iam, arn) == "implicitDeny"
    iam.create_group(GroupName="ml")
    iam.add_user_to_group(GroupName="ml", UserName="alice")
    iam.put_group_policy(GroupName="ml", PolicyName="pass", PolicyDocument=policy(PASS_ROLE))
    assert decision(iam, arn) == "allowed"


def test_several_resources_are_decided_each(iam: Any) -> None:
    arn = iam.create_role(RoleName="Ops", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    iam.put_role_policy(RoleName="Ops", PolicyName="pass", PolicyDocument=policy(PASS_ROLE))
    other = f"arn:aws:iam::{ACCOUNT}:role/admin"
    [result] = iam.simulate_principal_policy(
        PolicySourceArn=arn,
        ActionNames=["iam:PassRole"],
        ResourceArns=[TARGET, other],
        ContextEntries=TO_SAGEMAKER,
    )["EvaluationResults"]
    assert result["EvalDecision"] == "implicitDeny"
    assert [
        (r["EvalResourceName"], r["EvalResourceDecision"]) for r in result["ResourceSpecificResults"]
    ] == [
        (TARGET, "allowed"),
        (other, "implicitDeny"),
    ]


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (f"arn:aws:iam::{ACCOUNT}:role/nobody", "NoSuchEntity"),
        (f"arn:aws:iam::{ACCOUNT}:role/Ops", "NoSuchEntity"),  # the role's path left out
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/Ops/alice", "InvalidInput"),
    ],
)
def test_only_an_existing_user_group_or_role_is_simulated(iam: Any, source: str, code: str) -> None:
    iam.create_role(RoleName="Ops", Path="/teams/", AssumeRolePolicyDocument="{}")
    with pytest.raises(ClientError) as refused:
        decision(iam, source)
    assert refused.value.response["Error"]["Code"] == code


def test_what_the_sandbox_does_not_simulate_is_refused_not_answered(iam: Any) -> None:
    arn = iam.create_role(RoleName="Ops", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    iam.put_role_policy(
        RoleName="Ops",
        PolicyName="mfa",
        PolicyDocument=policy({**PASS_ROLE, "Condition": {"Bool": {"aws:MultiFactorAuthPresent": "true"}}}),
    )
    with pytest.raises(ClientError) as refused:
        decision(iam, arn)
    assert refused.value.response["Error"]["Code"] == "InvalidInput"
    assert "aws:MultiFactorAuthPresent" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as refused:
        iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["iam:PassRole"], CallerArn=arn)
    assert refused.value.response["Error"]["Code"] == "InvalidInput"


def test_s3_refuses_another_accounts_bucket_named_as_expected_owner(iam: Any) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="ours")
    other = boto3.client("sts", region_name="us-east-1").assume_role(
        RoleArn="arn:aws:iam::210987654321:role/outsider", RoleSessionName="outsider"
    )["Credentials"]
    boto3.client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id=other["AccessKeyId"],
        aws_secret_access_key=other["SecretAccessKey"],
        aws_session_token=other["SessionToken"],
    ).create_bucket(Bucket="theirs")

    assert s3.get_bucket_location(Bucket="ours", ExpectedBucketOwner=ACCOUNT)["LocationConstraint"] is None
    s3.head_bucket(Bucket="ours", ExpectedBucketOwner=ACCOUNT)
    s3.get_bucket_location(Bucket="theirs")  # without the header, as moto and S3 answer it
    for call in (s3.get_bucket_location, s3.head_bucket):
        with pytest.raises(ClientError) as refused:
            call(Bucket="theirs", ExpectedBucketOwner=ACCOUNT)
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as missing:
        s3.get_bucket_location(Bucket="nobodys", ExpectedBucketOwner=ACCOUNT)
    assert missing.value.response["Error"]["Code"] == "NoSuchBucket"
