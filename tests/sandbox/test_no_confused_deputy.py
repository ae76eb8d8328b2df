"""No confused deputy, through the SigV4-signed local API (issue 20, finding 4): a caller allowed only
``execute-api:Invoke`` cannot make Autopilot pass a role it may not pass, use another account's
lifecycle bucket, another VPC's security group, or an EKS cluster outside the stack's EksClusterNames.

The stack is the real template with CallerResourceChecks Enabled; ApiFunction runs with its own role
and the sandbox enforces it (GetRole, SimulatePrincipalPolicy, GetBucketLocation, the EC2 describes
are allowed by ApiCallerChecksPolicy or refused). SimulatePrincipalPolicy is answered by
sandbox/emulator/iam_simulation.py from the same policy evaluation the sandbox enforces IAM with; S3's
ExpectedBucketOwner by sandbox/emulator/s3_bucket_owner.py. Only dry runs: every check a create makes, nothing
created, so the frozen clock never moves.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from autopilot_cli.client import ApiError, AutopilotClient
from botocore.credentials import Credentials

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.harness.core import Sandbox
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
EXECUTION_ROLE = "team-hyperpod-execution-role"
BUCKET = "team-lifecycle-scripts"
OUTSIDE_BUCKET = "someone-elses-lifecycle-scripts"
OTHER_ACCOUNT = "210987654321"
SSO_PATH = "/aws-reserved/sso.amazonaws.com/"
INVOKE = {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*"}
GROUPS = range(3)  # the sample request's three instance groups


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    parameters = {**DEMO_PARAMETERS, "CallerResourceChecks": "Enabled", "EksClusterNames": "team-eks"}
    with Sandbox(parameters=parameters, speed=0, schedules=False) as running:
        yield running


@pytest.fixture(scope="module")
def world(sandbox: Sandbox) -> dict[str, str]:
    """The account's execution role, lifecycle bucket and two VPCs; a bucket of another account."""
    iam = sandbox.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    role_arn = iam.create_role(RoleName=EXECUTION_ROLE, AssumeRolePolicyDocument=json.dumps(trust))["Role"][
        "Arn"
    ]
    sandbox.client("s3").create_bucket(Bucket=BUCKET)
    outsider = sandbox.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{OTHER_ACCOUNT}:role/outsider", RoleSessionName="outsider"
    )["Credentials"]
    boto3.client(
        "s3",
        region_name=sandbox.region,
        endpoint_url=sandbox.client("s3").meta.endpoint_url,
        aws_access_key_id=outsider["AccessKeyId"],
        aws_secret_access_key=outsider["SecretAccessKey"],
        aws_session_token=outsider["SessionToken"],
    ).create_bucket(Bucket=OUTSIDE_BUCKET)
    ec2 = sandbox.client("ec2")
    found: dict[str, str] = {"role": role_arn}
    for label, cidr in (("a", "10.10.0.0/16"), ("b", "10.20.0.0/16")):
        vpc = ec2.create_vpc(CidrBlock=cidr)["Vpc"]["VpcId"]
        found[f"vpc_{label}"] = vpc
        found[f"subnet_{label}"] = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr.replace("0.0/16", "1.0/24"))[
            "Subnet"
        ]["SubnetId"]
        found[f"sg_{label}"] = ec2.create_security_group(
            GroupName=f"efa-{label}", Description="efa", VpcId=vpc
        )["GroupId"]
    return found


def caller(
    sandbox: Sandbox, role_name: str, statements: list[dict[str, Any]], path: str = "/"
) -> AutopilotClient:
    """An API client signing as a session of a role whose only policy is ``statements``."""
    iam = sandbox.client("iam")
    role_arn = iam.create_role(RoleName=role_name, Path=path, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    document = {"Version": "2012-10-17", "Statement": statements}
    iam.put_role_policy(RoleName=role_name, PolicyName="permissions", PolicyDocument=json.dumps(document))
    credentials = sandbox.client("sts").assume_role(RoleArn=role_arn, RoleSessionName="carol")["Credentials"]
    return AutopilotClient(
        sandbox.serve_api(0),
        region=sandbox.region,
        credentials=Credentials(
            credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"]
        ),
    )


@pytest.fixture(scope="module")
def researcher(sandbox: Sandbox) -> AutopilotClient:
    """Allowed to call the API, and nothing else."""
    return caller(sandbox, "Researcher", [INVOKE])


@pytest.fixture(scope="module")
def launcher(sandbox: Sandbox, world: dict[str, str]) -> AutopilotClient:
    """An Identity Center user whose permission set may also pass the execution role to SageMaker."""
    pass_role = {
        "Effect": "Allow",
        "Action": "iam:PassRole",
        "Resource": world["role"],
        "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
    }
    return caller(sandbox, "AWSReservedSSO_Launch_0123456789abcdef", [INVOKE, pass_role], path=SSO_PATH)


def body(world: dict[str, str], *, bucket: str = BUCKET, security_group: str | None = None) -> dict[str, Any]:
    request = copy.deepcopy(create_body("team-cluster"))
    config = request["clusterConfig"]
    for group in config["InstanceGroups"]:
        group["ExecutionRole"] = world["role"]
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{bucket}/src/"
    config["VpcConfig"] = {
        "Subnets": [world["subnet_a"]],
        "SecurityGroupIds": [security_group or world["sg_a"]],
    }
    return request


def refused(act: Any) -> ApiError:
    with pytest.raises(ApiError) as error:
        act()
    return error.value


def paths(error: ApiError) -> list[str]:
    return [e["path"] for e in error.errors or []]


def test_a_caller_without_pass_role_is_refused_and_one_with_it_is_not(
    world: dict[str, str], researcher: AutopilotClient, launcher: AutopilotClient
) -> None:
    error = refused(lambda: researcher.plan_create(body(world)))
    assert error.status == 403
    assert paths(error) == [f"InstanceGroups[{i}].ExecutionRole" for i in GROUPS]
    assert "may not pass this role" in (error.errors or [{}])[0]["message"]
    assert "do not allow iam:PassRole" in (error.errors or [{}])[0]["message"]

    error = refused(lambda: researcher.create_cluster(body(world)))  # a create as its dry run
    assert (error.status, paths(error)) == (403, [f"InstanceGroups[{i}].ExecutionRole" for i in GROUPS])
    assert refused(lambda: researcher.get_cluster("team-cluster")).status == 404  # nothing registered

    plan = launcher.plan_create(body(world))
    assert plan["clusterName"] == "team-cluster"
    assert any("iam:PassRole" in check for check in plan["checks"])


def test_a_lifecycle_bucket_of_another_account_or_of_nobody_is_refused(
    world: dict[str, str], launcher: AutopilotClient
) -> None:
    for bucket, why in (
        (OUTSIDE_BUCKET, "is not this account's"),
        ("no-such-lifecycle-bucket", "does not exist"),
    ):
        error = refused(lambda bucket=bucket: launcher.plan_create(body(world, bucket=bucket)))
        assert error.status == 400, bucket
        assert paths(error) == [f"InstanceGroups[{i}].LifeCycleConfig.SourceS3Uri" for i in GROUPS]
        assert why in (error.errors or [{}])[0]["message"]


def test_a_security_group_of_another_vpc_is_refused(world: dict[str, str], launcher: AutopilotClient) -> None:
    error = refused(lambda: launcher.plan_create(body(world, security_group=world["sg_b"])))
    assert error.status == 400
    assert paths(error) == ["VpcConfig.SecurityGroupIds[0]"]
    assert "not the cluster's VPC" in (error.errors or [{}])[0]["message"]


def test_an_eks_cluster_outside_the_stacks_eks_cluster_names_is_refused(
    sandbox: Sandbox, world: dict[str, str], launcher: AutopilotClient
) -> None:
    request = body(world)
    request["clusterConfig"]["Orchestrator"] = {
        "Eks": {"ClusterArn": f"arn:aws:eks:{sandbox.region}:{sandbox.account_id}:cluster/finance-eks"}
    }
    request["provisioningParameters"] = None
    error = refused(lambda: launcher.plan_create(request))
    assert error.status == 400
    assert "Orchestrator.Eks.ClusterArn" in paths(error)
    [message] = [e["message"] for e in error.errors or [] if e["path"] == "Orchestrator.Eks.ClusterArn"]
    assert "'finance-eks' is not one of this Autopilot stack's EksClusterNames (team-eks)" in message


def test_login_nodes_go_only_into_target_groups_the_caller_may_register_targets_in(
    sandbox: Sandbox, world: dict[str, str], launcher: AutopilotClient
) -> None:
    group = sandbox.client("elbv2").create_target_group(
        Name="autopilot-login-team", Protocol="TCP", Port=22, VpcId=world["vpc_a"], TargetType="ip"
    )["TargetGroups"][0]["TargetGroupArn"]
    request = {**body(world), "loginTargetGroupArns": [group]}
    error = refused(lambda: launcher.plan_create(request))
    assert error.status == 403
    assert paths(error) == ["loginTargetGroupArns[0]"]
    assert "may not register targets in this target group" in (error.errors or [{}])[0]["message"]

    register = {"Effect": "Allow", "Action": "elasticloadbalancing:RegisterTargets", "Resource": group}
    pass_role = {"Effect": "Allow", "Action": "iam:PassRole", "Resource": world["role"]}
    operator = caller(sandbox, "LoginOperator", [INVOKE, pass_role, register])
    assert operator.plan_create(request)["clusterName"] == "team-cluster"
