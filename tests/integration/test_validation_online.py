"""The --aws checks against moto (and botocore's Stubber where moto lacks a field or an error).

moto 5.2.5 knows no SageMaker quotas (Service Quotas answers only for vpc) and has no IAM policy
simulator: MotoGaps answers those calls, after botocore has validated the request and with responses
validated against botocore's output shapes, from what each test sets.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import boto3
import botocore.handlers
import pytest
from autopilot import aws
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.errors import InvalidRequestError
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.validate_config import validate_config as validate_body
from autopilot.models.bodies import CreateClusterBody, ValidateBody
from autopilot.settings import ApiSettings
from autopilot_cli.main import main
from autopilot_config.validation import (
    CLUSTER_CONFIG,
    PROVISIONING_PARAMETERS,
    OnlineChecker,
    validate_config,
)
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber
from botocore.validate import validate_parameters
from moto import mock_aws

from tests.unit.validation.builders import (
    ACCOUNT,
    REGION,
    changed,
    errors,
    messages_at,
    slurm_config,
    slurm_provisioning,
    unchecked,
    warnings,
    without,
)

C, P = CLUSTER_CONFIG, PROVISIONING_PARAMETERS
ROLE_NAME = "sagemaker-hyperpod-execution-role"
SAGEMAKER_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
LIFECYCLE = "InstanceGroups[0].LifeCycleConfig"


@dataclass
class MotoGaps:
    """SageMaker's instance quotas (name -> value) and the policy simulator's decisions
    ((action, resource) -> EvalDecision, else "allowed") that moto cannot give."""

    default_quotas: dict[str, float] = field(default_factory=dict)
    applied_quotas: dict[str, float] = field(default_factory=dict)
    decisions: dict[tuple[str, str], str] = field(default_factory=dict)

    def handlers(self) -> list[tuple[str, Any]]:
        answers = {
            "service-quotas.ListAWSDefaultServiceQuotas": lambda params: self._quotas(
                params, self.default_quotas
            ),
            "service-quotas.ListServiceQuotas": lambda params: self._quotas(params, self.applied_quotas),
            "iam.SimulatePrincipalPolicy": self._simulate,
        }

        def keep_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["moto_gaps_params"] = params

        def answer(
            model: Any, context: dict[str, Any], request_signer: Any, **_: Any
        ) -> tuple[AWSResponse, dict[str, Any]]:
            # Answering before the request is signed must not spare a caller without credentials.
            if request_signer._credentials is None:
                raise NoCredentialsError
            service = model.service_model.service_id.hyphenize()
            status, response = answers[f"{service}.{model.name}"](context["moto_gaps_params"])
            if status == 200:
                validate_parameters(response, model.output_shape)
            response.setdefault("ResponseMetadata", {"HTTPStatusCode": status})
            return AWSResponse("https://moto-gaps", status, HTTPHeaders(), None), response

        return [
            handler
            for event in answers
            for handler in (
                (f"before-parameter-build.{event}", keep_params),
                (f"before-call.{event}", answer),
            )
        ]

    @staticmethod
    def _quotas(params: dict[str, Any], values: dict[str, float]) -> tuple[int, dict[str, Any]]:
        if params["ServiceCode"] != "sagemaker":
            return 200, {"Quotas": []}
        quotas = [
            {"ServiceCode": "sagemaker", "QuotaCode": f"L-{abs(hash(name)) % 16**8:08X}", "QuotaName": name}
            | {"Value": value, "Adjustable": True, "GlobalQuota": False}
            for name, value in values.items()
        ]
        return 200, {"Quotas": quotas}

    def _simulate(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = params["PolicySourceArn"].rsplit("/", 1)[-1]
        try:
            boto3.client("iam").get_role(RoleName=name)  # IAM simulates only principals that exist
        except boto3.client("iam").exceptions.NoSuchEntityException:
            return 404, {"Error": {"Code": "NoSuchEntity", "Message": f"role {name} not found"}}
        results = [
            {
                "EvalActionName": action,
                "EvalResourceName": resource,
                "EvalDecision": self.decisions.get((action, resource), "allowed"),
            }
            for action in params["ActionNames"]
            for resource in params["ResourceArns"]
        ]
        return 200, {"EvaluationResults": results, "IsTruncated": False}


GAPS = MotoGaps()


@pytest.fixture(scope="module")
def moto() -> Iterator[None]:
    """One moto world for the module: its backends take seconds to warm up, the resources do not."""
    with pytest.MonkeyPatch.context() as env:
        # Clients made from now on (every session reads BUILTIN_HANDLERS) also answer MotoGaps' calls.
        env.setattr(
            botocore.handlers, "BUILTIN_HANDLERS", [*botocore.handlers.BUILTIN_HANDLERS, *GAPS.handlers()]
        )
        env.setattr(boto3, "DEFAULT_SESSION", None)
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }.items():
            env.setenv(name, value)
        with mock_aws():
            aws.client.cache_clear()
            boto3.client("iam").create_role(
                RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST)
            )
            yield
        aws.client.cache_clear()


@dataclass
class Account:
    """The resources the Slurm fixture names, created in moto."""

    ec2: Any
    vpc_id: str
    subnet_id: str
    security_group_id: str
    file_system_dns: str
    bucket: str

    def config(self) -> dict[str, Any]:
        config = changed(
            slurm_config(),
            ("VpcConfig.Subnets", [self.subnet_id]),
            ("VpcConfig.SecurityGroupIds", [self.security_group_id]),
        )
        for index in range(len(config["InstanceGroups"])):
            config = changed(
                config, (f"InstanceGroups[{index}].LifeCycleConfig.SourceS3Uri", f"s3://{self.bucket}/src/")
            )
        return config

    def provisioning(self) -> dict[str, Any]:
        return changed(slurm_provisioning(), ("fsx_dns_name", self.file_system_dns))

    def security_group(
        self, *, inbound: bool = True, outbound: bool = True, vpc_id: str | None = None
    ) -> str:
        group_id: str = self.ec2.create_security_group(
            GroupName=f"efa-{inbound}-{outbound}-{vpc_id}", Description="EFA", VpcId=vpc_id or self.vpc_id
        )["GroupId"]
        self_rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}]
        if inbound:
            self.ec2.authorize_security_group_ingress(GroupId=group_id, IpPermissions=self_rule)
        if outbound:
            self.ec2.authorize_security_group_egress(GroupId=group_id, IpPermissions=self_rule)
        return group_id


@pytest.fixture
def account(moto: None) -> Account:
    """Fresh resources for each test (own VPC, bucket, file system), so tests may change them."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc_id = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]
    main_table = ec2.describe_route_tables(
        Filters=[{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": "association.main", "Values": ["true"]}]
    )["RouteTables"][0]["RouteTableId"]
    ec2.create_vpc_endpoint(
        VpcId=vpc_id,
        ServiceName=f"com.amazonaws.{REGION}.s3",
        VpcEndpointType="Gateway",
        RouteTableIds=[main_table],
    )
    # GPU quotas default to 0; this account has had its p5 quota raised.
    GAPS.default_quotas = {
        "ml.m5.12xlarge for cluster usage": 4,
        "ml.m5.4xlarge for cluster usage": 4,
        "ml.p5.48xlarge for cluster usage": 0,
    }
    GAPS.applied_quotas = {"ml.p5.48xlarge for cluster usage": 8}
    GAPS.decisions = {}
    file_system = boto3.client("fsx", region_name=REGION).create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=[subnet_id],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
    )["FileSystem"]
    bucket = f"sagemaker-lifecycle-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket=bucket, Key="src/on_create.sh", Body=b"#!/bin/bash\n")
    s3.put_object(Bucket=bucket, Key="src/provisioning_parameters.json", Body=b"{}")
    built = Account(ec2, vpc_id, subnet_id, "", file_system["DNSName"], bucket)
    built.security_group_id = built.security_group()
    return built


def check(config: dict[str, Any], provisioning: dict[str, Any] | None, **clients: Any) -> Any:
    return validate_config(config, provisioning, online=OnlineChecker(region=REGION, **clients))


def test_a_config_that_matches_the_account_passes_every_online_check(account: Account) -> None:
    report = check(account.config(), account.provisioning())
    assert (report.errors, report.warnings) == ([], [])


def test_a_public_subnet_is_an_error(account: Account) -> None:
    account.ec2.modify_subnet_attribute(SubnetId=account.subnet_id, MapPublicIpOnLaunch={"Value": True})
    report = check(account.config(), account.provisioning())
    assert errors(report) == [
        (
            C,
            "VpcConfig.Subnets[0]",
            f"subnet {account.subnet_id} is public (MapPublicIpOnLaunch is true); "
            "HyperPod nodes need private subnets",
        )
    ]


def test_every_subnet_is_checked_not_only_the_first(account: Account) -> None:
    public = account.ec2.create_subnet(VpcId=account.vpc_id, CidrBlock="10.1.1.0/24")["Subnet"]["SubnetId"]
    account.ec2.modify_subnet_attribute(SubnetId=public, MapPublicIpOnLaunch={"Value": True})
    config = changed(
        account.config(), ("VpcConfig.Subnets", [account.subnet_id, public, "subnet-0123456789abcdef0"])
    )
    report = check(config, account.provisioning())
    assert messages_at(errors(report), "VpcConfig.Subnets[1]") == [
        f"subnet {public} is public (MapPublicIpOnLaunch is true); HyperPod nodes need private subnets"
    ]
    assert messages_at(errors(report), "VpcConfig.Subnets[2]") == [
        f"subnet subnet-0123456789abcdef0 does not exist in {REGION}"
    ]


@pytest.mark.parametrize(
    ("inbound", "outbound", "missing"),
    [
        (False, True, ["inbound rule allowing all traffic from"]),
        (True, False, ["outbound rule allowing all traffic to"]),
        (False, False, ["inbound rule allowing all traffic from", "outbound rule allowing all traffic to"]),
    ],
)
def test_security_groups_need_all_traffic_to_and_from_themselves(
    account: Account, inbound: bool, outbound: bool, missing: list[str]
) -> None:
    group_id = account.security_group(inbound=inbound, outbound=outbound)
    config = changed(account.config(), ("VpcConfig.SecurityGroupIds", [account.security_group_id, group_id]))
    report = check(config, account.provisioning())
    assert messages_at(errors(report), "VpcConfig.SecurityGroupIds[1]") == [
        f"security group {group_id} has no {rule} itself (EFA needs it between the nodes)" for rule in missing
    ]
    assert messages_at(errors(report), "VpcConfig.SecurityGroupIds[0]") == []


def test_a_security_group_in_another_vpc_or_missing_is_an_error(account: Account) -> None:
    other_vpc = account.ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    elsewhere = account.security_group(vpc_id=other_vpc)
    config = changed(account.config(), ("VpcConfig.SecurityGroupIds", [elsewhere, "sg-0123456789abcdef0"]))
    report = check(config, account.provisioning())
    assert messages_at(errors(report), "VpcConfig.SecurityGroupIds[0]") == [
        f"security group {elsewhere} is in {other_vpc} but the subnets are in {account.vpc_id}"
    ]
    assert messages_at(errors(report), "VpcConfig.SecurityGroupIds[1]") == [
        f"security group sg-0123456789abcdef0 does not exist in {REGION}"
    ]


def test_an_instance_groups_override_vpc_is_checked_too(account: Account) -> None:
    public = account.ec2.create_subnet(VpcId=account.vpc_id, CidrBlock="10.1.2.0/24")["Subnet"]["SubnetId"]
    account.ec2.modify_subnet_attribute(SubnetId=public, MapPublicIpOnLaunch={"Value": True})
    override = {"SecurityGroupIds": [account.security_group_id], "Subnets": [public]}
    report = check(
        changed(account.config(), ("InstanceGroups[2].OverrideVpcConfig", override)), account.provisioning()
    )
    assert [path for _, path, _ in errors(report)] == ["InstanceGroups[2].OverrideVpcConfig.Subnets[0]"]


def test_an_fsx_file_system_that_does_not_exist_is_an_error(account: Account) -> None:
    provisioning = changed(
        account.provisioning(), ("fsx_dns_name", "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com")
    )
    report = check(account.config(), provisioning)
    assert errors(report) == [
        (P, "fsx_dns_name", f"FSx file system fs-0123456789abcdef0 does not exist in {REGION}")
    ]


def test_an_fsx_file_system_of_the_wrong_kind_is_an_error(account: Account) -> None:
    zfs = boto3.client("fsx", region_name=REGION).create_file_system(
        FileSystemType="OPENZFS", StorageCapacity=64, SubnetIds=[account.subnet_id]
    )["FileSystem"]
    report = check(account.config(), changed(account.provisioning(), ("fsx_dns_name", zfs["DNSName"])))
    assert errors(report) == [
        (P, "fsx_dns_name", f"{zfs['FileSystemId']} is an FSx for OPENZFS file system, not LUSTRE")
    ]


def _stubbed_fsx(file_system: dict[str, Any]) -> tuple[Any, Stubber]:
    # moto does not report a Lustre MountName, so the mount name check runs against botocore's Stubber.
    client = boto3.client("fsx", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_response(
        "describe_file_systems",
        {"FileSystems": [file_system]},
        {"FileSystemIds": [file_system["FileSystemId"]]},
    )
    return client, stubber


def test_the_fsx_mount_name_must_match_the_file_system(account: Account) -> None:
    file_system_id = "fs-0123456789abcdef0"
    dns = f"{file_system_id}.fsx.{REGION}.amazonaws.com"
    fsx, stubber = _stubbed_fsx(
        {
            "FileSystemId": file_system_id,
            "FileSystemType": "LUSTRE",
            "DNSName": dns,
            "LustreConfiguration": {"MountName": "zyxwvuts"},
        }
    )
    with stubber:
        report = check(account.config(), changed(account.provisioning(), ("fsx_dns_name", dns)), fsx=fsx)
    assert errors(report) == [
        (P, "fsx_mountname", f"does not match file system {file_system_id} (its mount name is 'zyxwvuts')")
    ]


def test_the_fsx_dns_name_must_be_the_file_systems(account: Account) -> None:
    file_system_id = "fs-0123456789abcdef0"
    given = f"{file_system_id}.fsx.{REGION}.amazonaws.com"
    actual = f"{file_system_id}.fsx.{REGION}.amazonaws.com.cn"
    fsx, stubber = _stubbed_fsx(
        {
            "FileSystemId": file_system_id,
            "FileSystemType": "LUSTRE",
            "DNSName": actual,
            "LustreConfiguration": {"MountName": "abcdefgh"},
        }
    )
    with stubber:
        report = check(account.config(), changed(account.provisioning(), ("fsx_dns_name", given)), fsx=fsx)
    assert errors(report) == [
        (P, "fsx_dns_name", f"does not match file system {file_system_id} (its DNS name is {actual})")
    ]


def test_fsx_named_in_instance_storage_is_checked(account: Account) -> None:
    storage = {
        "FsxLustreConfig": {"DnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "MountName": "abc"}
    }
    config = changed(account.config(), ("InstanceGroups[2].InstanceStorageConfigs", [storage]))
    report = check(config, account.provisioning())
    assert messages_at(
        errors(report), "InstanceGroups[2].InstanceStorageConfigs[0].FsxLustreConfig.DnsName"
    ) == [f"FSx file system fs-0123456789abcdef0 does not exist in {REGION}"]


def test_a_missing_lifecycle_script_is_an_error(account: Account) -> None:
    config = changed(account.config(), (f"{LIFECYCLE}.OnCreate", "setup.sh"))
    report = check(config, account.provisioning())
    assert errors(report) == [
        (C, f"{LIFECYCLE}.OnCreate", f"lifecycle script s3://{account.bucket}/src/setup.sh not found")
    ]


def test_a_missing_lifecycle_bucket_is_an_error(account: Account) -> None:
    config = changed(account.config(), (f"{LIFECYCLE}.SourceS3Uri", "s3://sagemaker-missing/src"))
    report = check(config, account.provisioning())
    assert errors(report) == [(C, f"{LIFECYCLE}.OnCreate", "bucket sagemaker-missing does not exist")]


def test_provisioning_parameters_missing_next_to_the_scripts_is_a_warning(account: Account) -> None:
    boto3.client("s3", region_name=REGION).delete_object(
        Bucket=account.bucket, Key="src/provisioning_parameters.json"
    )
    report = check(account.config(), account.provisioning())
    assert report.valid
    assert warnings(report) == [
        (
            C,
            f"{LIFECYCLE}.SourceS3Uri",
            f"s3://{account.bucket}/src/provisioning_parameters.json not found: the lifecycle scripts "
            "read the Slurm layout from it (upload provisioning-parameters.json there)",
        )
    ]


def test_a_missing_execution_role_is_an_error(account: Account) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/not-there"
    report = check(
        changed(account.config(), ("InstanceGroups[1].ExecutionRole", role)), account.provisioning()
    )
    assert errors(report) == [(C, "InstanceGroups[1].ExecutionRole", "IAM role not-there does not exist")]


def test_a_role_sagemaker_cannot_assume_is_an_error(account: Account) -> None:
    trust = {
        **SAGEMAKER_TRUST,
        "Statement": [{**SAGEMAKER_TRUST["Statement"][0], "Principal": {"Service": "ec2.amazonaws.com"}}],
    }
    boto3.client("iam").create_role(RoleName="ec2-role", AssumeRolePolicyDocument=json.dumps(trust))
    role = f"arn:aws:iam::{ACCOUNT}:role/ec2-role"
    report = check(
        changed(account.config(), ("InstanceGroups[1].ExecutionRole", role)), account.provisioning()
    )
    assert errors(report) == [
        (
            C,
            "InstanceGroups[1].ExecutionRole",
            "role ec2-role cannot be assumed by SageMaker: its trust policy does not allow "
            "sagemaker.amazonaws.com to call sts:AssumeRole",
        )
    ]


def test_a_role_arn_with_the_wrong_path_is_an_error(account: Account) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/service-role/{ROLE_NAME}"
    report = check(
        changed(account.config(), ("InstanceGroups[1].ExecutionRole", role)), account.provisioning()
    )
    assert errors(report) == [
        (
            C,
            "InstanceGroups[1].ExecutionRole",
            f"does not match the role's ARN (arn:aws:iam::{ACCOUNT}:role/{ROLE_NAME})",
        )
    ]


def test_the_cluster_role_is_checked_too(account: Account) -> None:
    role = f"arn:aws:iam::{ACCOUNT}:role/hyperpod-autoscaling"
    report = check(changed(account.config(), ("ClusterRole", role)), account.provisioning())
    assert errors(report) == [(C, "ClusterRole", "IAM role hyperpod-autoscaling does not exist")]


def test_a_lifecycle_script_that_cannot_be_read_is_unchecked(account: Account) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    stubber = Stubber(s3)
    stubber.add_client_error("head_object", service_error_code="403", http_status_code=403)
    stubber.add_client_error("head_object", service_error_code="403", http_status_code=403)
    with stubber:
        report = check(account.config(), account.provisioning(), s3=s3)
    assert report.valid
    assert (warnings(report), report.complete) == ([], False)
    assert unchecked(report) == [
        (C, f"{LIFECYCLE}.OnCreate", f"could not check s3://{account.bucket}/src/on_create.sh: 403"),
        (
            C,
            f"{LIFECYCLE}.SourceS3Uri",
            f"could not check s3://{account.bucket}/src/provisioning_parameters.json: 403",
        ),
    ]


def test_a_check_that_is_denied_is_unchecked_not_a_crash(account: Account) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    for operation in ("describe_subnets", "describe_security_groups"):
        stubber.add_client_error(
            operation, service_error_code="UnauthorizedOperation", service_message="You are not authorized"
        )
    with stubber:
        report = check(account.config(), account.provisioning(), ec2=ec2)
    assert report.valid
    assert (warnings(report), report.complete) == ([], False)
    assert unchecked(report) == [
        (
            C,
            "VpcConfig.Subnets[0]",
            f"could not check subnet {account.subnet_id}: UnauthorizedOperation: You are not authorized",
        ),
        (
            C,
            "VpcConfig.SecurityGroupIds[0]",
            f"could not check security group {account.security_group_id}: UnauthorizedOperation: "
            "You are not authorized",
        ),
    ]


def test_without_credentials_every_check_is_unchecked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never reach for instance metadata
    session = boto3.session.Session(region_name=REGION)
    report = validate_config(slurm_config(), slurm_provisioning(), online=OnlineChecker(session))
    assert report.valid
    assert {path for _, path, _ in unchecked(report)} == {
        "VpcConfig.Subnets[0]",
        "VpcConfig.SecurityGroupIds[0]",
        "fsx_dns_name",
        f"{LIFECYCLE}.OnCreate",
        f"{LIFECYCLE}.SourceS3Uri",
        "InstanceGroups[0].ExecutionRole",
        "InstanceGroups[0].InstanceCount",
    }
    assert all("Unable to locate credentials" in message for _, _, message in unchecked(report))


def test_the_online_region_is_the_clusters_region(account: Account) -> None:
    config = without(account.config(), "VpcConfig")
    online = OnlineChecker(boto3.session.Session(region_name="eu-west-1"))
    report = validate_config(
        config, without(account.provisioning(), "fsx_dns_name", "fsx_mountname"), online=online
    )
    assert online.region == "eu-west-1"
    assert errors(report) == []  # nothing about regions
    plan = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-capacity-plan"
    report = validate_config(
        changed(config, ("InstanceGroups[2].TrainingPlanArn", plan)), None, online=online
    )
    assert messages_at(errors(report), "InstanceGroups[2].TrainingPlanArn") == [
        "is in us-west-2 but the cluster's region is eu-west-1"
    ]


def test_the_cli_runs_the_online_checks(
    account: Account, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cluster-config.json"
    provisioning = tmp_path / "provisioning_parameters.json"
    config.write_text(json.dumps(account.config()))
    provisioning.write_text(json.dumps(account.provisioning()))
    argv = [
        "validate",
        "--cluster-config",
        str(config),
        "--provisioning-parameters",
        str(provisioning),
        "--aws",
    ]
    assert main(argv) == 0
    account.ec2.modify_subnet_attribute(SubnetId=account.subnet_id, MapPublicIpOnLaunch={"Value": True})
    capsys.readouterr()
    assert main([*argv, "--region", REGION]) == 1
    assert capsys.readouterr().out == (
        f"cluster-config.json: VpcConfig.Subnets[0]: subnet {account.subnet_id} is public "
        "(MapPublicIpOnLaunch is true); HyperPod nodes need private subnets\n"
    )


# -- preflight: what makes a create fail after it has started (issue 23) ------------------------------
def _private_subnet(account: Account, cidr: str, *, default_route: str | None = None) -> str:
    """A subnet with its own route table: only the local route, plus 0.0.0.0/0 to an internet
    gateway ("igw") or a NAT gateway ("nat") when asked."""
    ec2 = account.ec2
    subnet_id: str = ec2.create_subnet(VpcId=account.vpc_id, CidrBlock=cidr)["Subnet"]["SubnetId"]
    table_id = ec2.create_route_table(VpcId=account.vpc_id)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=table_id, SubnetId=subnet_id)
    if default_route == "igw":
        gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=account.vpc_id)
        ec2.create_route(RouteTableId=table_id, DestinationCidrBlock="0.0.0.0/0", GatewayId=gateway)
    elif default_route == "nat":
        allocation = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(SubnetId=account.subnet_id, AllocationId=allocation)["NatGateway"]
        ec2.create_route(
            RouteTableId=table_id, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGatewayId"]
        )
    return subnet_id


def _no_route_message(subnet_id: str, account: Account) -> str:
    table = account.ec2.describe_route_tables(
        Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}]
    )["RouteTables"][0]["RouteTableId"]
    return (
        f"subnet {subnet_id} cannot reach S3: its route table {table} has no S3 gateway endpoint and no "
        "NAT gateway route (0.0.0.0/0), so the nodes cannot download the lifecycle scripts; add an S3 "
        "gateway endpoint to the route table or a NAT gateway route"
    )


@pytest.mark.parametrize(("default_route", "reaches_s3"), [(None, False), ("igw", False), ("nat", True)])
def test_a_subnet_without_a_route_to_s3_is_an_error(
    account: Account, default_route: str | None, reaches_s3: bool
) -> None:
    # The fixture's subnet uses the main table, which has the S3 gateway endpoint; this one does not.
    subnet_id = _private_subnet(account, "10.1.3.0/24", default_route=default_route)
    config = changed(account.config(), ("VpcConfig.Subnets", [account.subnet_id, subnet_id]))
    report = check(config, account.provisioning())
    expected = [] if reaches_s3 else [(C, "VpcConfig.Subnets[1]", _no_route_message(subnet_id, account))]
    assert errors(report) == expected
    assert messages_at(errors(report), "VpcConfig.Subnets[0]") == []


def test_an_s3_gateway_endpoint_on_the_subnets_own_table_is_a_route(account: Account) -> None:
    subnet_id = _private_subnet(account, "10.1.4.0/24")
    table = account.ec2.describe_route_tables(
        Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}]
    )["RouteTables"][0]["RouteTableId"]
    account.ec2.create_vpc_endpoint(
        VpcId=account.vpc_id,
        ServiceName=f"com.amazonaws.{REGION}.s3",
        VpcEndpointType="Gateway",
        RouteTableIds=[table],
    )
    report = check(changed(account.config(), ("VpcConfig.Subnets", [subnet_id])), account.provisioning())
    assert errors(report) == []


def test_a_quota_below_the_request_is_an_error(account: Account) -> None:
    GAPS.applied_quotas = {"ml.p5.48xlarge for cluster usage": 2}
    config = changed(
        account.config(),
        ("InstanceGroups[1].InstanceType", "ml.p5.48xlarge"),  # 1 + 4 p5 nodes in two groups
    )
    report = check(config, account.provisioning())
    [(file, path, message)] = errors(report)
    assert (file, path) == (C, "InstanceGroups[1].InstanceCount")  # the first group of that type
    assert message.startswith("the account's quota 'ml.p5.48xlarge for cluster usage' (L-")
    assert message.endswith(
        f") is 2 in {REGION}, below the 5 requested (InstanceGroups[1]: 1, InstanceGroups[2]: 4); "
        "request an increase in Service Quotas before creating (it takes days)"
    )


def test_a_quota_never_raised_is_its_default(account: Account) -> None:
    GAPS.applied_quotas = {}  # ListServiceQuotas leaves out quotas without an applied value
    report = check(account.config(), account.provisioning())
    assert [(path, message.split(" is ")[1]) for _, path, message in errors(report)] == [
        (
            "InstanceGroups[2].InstanceCount",
            f"0 in {REGION}, below the 4 requested (InstanceGroups[2]: 4); "
            "request an increase in Service Quotas before creating (it takes days)",
        )
    ]


def test_a_quota_service_quotas_does_not_list_is_unchecked(account: Account) -> None:
    config = changed(account.config(), ("InstanceGroups[1].InstanceType", "ml.g6e.48xlarge"))
    report = check(config, account.provisioning())
    assert report.valid
    assert unchecked(report) == [
        (
            C,
            "InstanceGroups[1].InstanceCount",
            "could not check the quota for ml.g6e.48xlarge: Service Quotas lists no "
            f"'ml.g6e.48xlarge for cluster usage' quota in {REGION}",
        )
    ]


def test_groups_on_a_training_plan_are_not_held_to_the_quota(account: Account) -> None:
    GAPS.applied_quotas = {}
    plan = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/p5-plan"
    report = check(
        changed(account.config(), ("InstanceGroups[2].TrainingPlanArn", plan)), account.provisioning()
    )
    assert messages_at(errors(report), "InstanceGroups[2].InstanceCount") == []


def _upload(account: Account, key: str, body: bytes) -> None:
    boto3.client("s3", region_name=REGION).put_object(Bucket=account.bucket, Key=key, Body=body)


def test_a_lifecycle_script_with_crlf_line_endings_is_an_error(account: Account) -> None:
    _upload(account, "src/on_create.sh", b"#!/bin/bash\r\nset -ex\r\necho ready\r\n")
    report = check(account.config(), account.provisioning())
    assert errors(report) == [
        (
            C,
            f"{LIFECYCLE}.OnCreate",
            f"s3://{account.bucket}/src/on_create.sh has Windows (CRLF) line endings: bash on the nodes "
            "fails on them (\"$'\\r': command not found\"); convert it with dos2unix and upload it again",
        )
    ]


# The workshop's base-config on_create.sh, cut down (awslabs/awsome-distributed-training,
# 1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/on_create.sh).
WORKSHOP_ON_CREATE = b"""#!/bin/bash

set -ex

LOG_FILE="/var/log/provision/provisioning.log"
mkdir -p "/var/log/provision"
touch $LOG_FILE

# Function to log messages
logger() {
  echo "$@" | tee -a $LOG_FILE
}

PROVISIONING_PARAMETERS_PATH="provisioning_parameters.json"

logger "[start] on_create.sh"

if ! python3 -u lifecycle_script.py -rc $SAGEMAKER_RESOURCE_CONFIG_PATH \\
    -pp $PROVISIONING_PARAMETERS_PATH > >(tee -a $LOG_FILE) 2>&1; then
    exit_code=$?
    logger "[stop] on_create.sh with error code: $exit_code"
    exit $exit_code
fi

logger "[stop] on_create.sh"
"""


def test_the_scripts_on_create_runs_must_be_next_to_it(account: Account) -> None:
    _upload(account, "src/on_create.sh", WORKSHOP_ON_CREATE)
    report = check(account.config(), account.provisioning())
    assert errors(report) == [
        (
            C,
            f"{LIFECYCLE}.OnCreate",
            f"s3://{account.bucket}/src/on_create.sh runs lifecycle_script.py, but "
            f"s3://{account.bucket}/src/lifecycle_script.py does not exist",
        )
    ]
    _upload(account, "src/lifecycle_script.py", b"print('configured')\n")
    assert errors(check(account.config(), account.provisioning())) == []


@pytest.mark.parametrize("decision", ["implicitDeny", "explicitDeny"])
def test_an_execution_role_that_cannot_read_the_scripts_is_found(account: Account, decision: str) -> None:
    script = f"arn:aws:s3:::{account.bucket}/src/on_create.sh"
    GAPS.decisions = {("s3:GetObject", script): decision}
    report = check(account.config(), account.provisioning())
    role = "InstanceGroups[0].ExecutionRole"
    if decision == "explicitDeny":
        assert messages_at(errors(report), role) == [
            f"role {ROLE_NAME} is denied s3:GetObject on {script} (an explicit Deny in its policies): "
            "HyperPod cannot download the lifecycle scripts"
        ]
    else:
        assert report.valid
        assert messages_at(warnings(report), role) == [
            f"role {ROLE_NAME}'s policies do not allow s3:GetObject on {script}: unless the bucket's "
            "policy grants it, HyperPod cannot download the lifecycle scripts (AccessDenied)"
        ]


def test_subnets_too_small_for_the_nodes(account: Account) -> None:
    # AWS keeps 5 addresses of every subnet: a /26 has 59 free, a /28 has 11.
    medium = _private_subnet(account, "10.1.5.0/26", default_route="nat")
    small = _private_subnet(account, "10.1.6.0/28", default_route="nat")
    report = check(changed(account.config(), ("VpcConfig.Subnets", [medium])), account.provisioning())
    assert report.valid
    assert messages_at(warnings(report), "VpcConfig.Subnets") == [
        f"the subnets ({medium}) have 59 free IP addresses but the nodes need about 130 "
        "(InstanceGroups[0]: 1 x ml.m5.12xlarge x 1; InstanceGroups[1]: 1 x ml.m5.4xlarge x 1; "
        "InstanceGroups[2]: 4 x ml.p5.48xlarge x 32: EFA instances take an address per network card); "
        "launches may fail with too few addresses"
    ]
    config = changed(
        account.config(), ("VpcConfig.Subnets", [small]), ("InstanceGroups[0].InstanceType", "ml.m5.4xlarge")
    )
    config = changed(config, ("InstanceGroups[1].InstanceCount", 3), ("InstanceGroups[2].InstanceCount", 8))
    report = check(config, account.provisioning())
    assert messages_at(errors(report), "VpcConfig.Subnets") == [
        f"the subnets ({small}) have 11 free IP addresses but the 12 nodes need at least one each; "
        "use larger subnets or add subnets"
    ]


def test_the_cli_finds_a_missing_route_a_low_quota_and_a_crlf_script_before_creating(
    account: Account, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subnet_id = _private_subnet(account, "10.1.7.0/24")
    GAPS.applied_quotas = {"ml.p5.48xlarge for cluster usage": 2}
    _upload(account, "src/on_create.sh", b"#!/bin/bash\r\necho ready\r\n")
    config = tmp_path / "cluster-config.json"
    config.write_text(json.dumps(changed(account.config(), ("VpcConfig.Subnets", [subnet_id]))))
    provisioning = tmp_path / "provisioning_parameters.json"
    provisioning.write_text(json.dumps(account.provisioning()))
    argv = ["validate", "--cluster-config", str(config), "--provisioning-parameters", str(provisioning)]
    assert main([*argv, "--aws", "--region", REGION]) == 1
    found = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in found] == [
        "VpcConfig.Subnets[0]",
        f"{LIFECYCLE}.OnCreate",
        "InstanceGroups[2].InstanceCount",
    ]
    assert "cannot reach S3" in found[0]
    assert "CRLF" in found[1]
    assert "below the 4 requested" in found[2]
    assert boto3.client("sagemaker", region_name=REGION).list_clusters()["ClusterSummaries"] == []


def _api(preflight: str) -> tuple[Any, list[dict[str, Any]]]:
    """The API's dependencies for a stack in this account with PreflightChecks ``preflight``; the
    workflow starts it records instead of making."""
    settings = ApiSettings.model_validate(
        {
            "STATE_TABLE_NAME": "state",
            "CREATE_CLUSTER_STATE_MACHINE_ARN": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:create",
            "CLEANUP_CLUSTER_STATE_MACHINE_ARN": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:cleanup",
            "ALERTS_TOPIC_ARN": f"arn:aws:sns:{REGION}:{ACCOUNT}:alerts",
            "BUDGET_NOTIFICATIONS_TOPIC_ARN": f"arn:aws:sns:{REGION}:{ACCOUNT}:budget-notifications",
            "IDEMPOTENCY_TABLE_NAME": "idempotency",
            "AWS_REGION": REGION,
            "EXECUTION_ROLE_NAME_PATTERNS": "*hyperpod*",
            "ADMIN_PRINCIPAL_ARNS": "",
            "AUTOPILOT_STACK_NAME": "autopilot",
            "PREFLIGHT_CHECKS": preflight,
        }
    )
    started: list[dict[str, Any]] = []

    class StepFunctions:
        def start_execution(self, **request: Any) -> dict[str, str]:
            started.append(request)
            return {"executionArn": f"{settings.create_cluster_state_machine_arn}:{request['name']}"}

    # SageMaker knows no cluster of the name (moto answers DescribeCluster with its own error code).
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stubber = Stubber(sagemaker)
    stubber.add_client_error("describe_cluster", service_error_code="ResourceNotFound")
    stubber.activate()
    deps = Dependencies(
        settings,
        InMemoryStateStore(),
        sagemaker=sagemaker,
        stepfunctions=cast(Any, StepFunctions()),
        events=boto3.client("events", region_name=REGION),
    )
    return deps, started


def test_the_apis_create_runs_the_preflight_checks_when_the_stack_enables_them(account: Account) -> None:
    subnet_id = _private_subnet(account, "10.1.8.0/24")
    GAPS.applied_quotas = {"ml.p5.48xlarge for cluster usage": 2}
    _upload(account, "src/on_create.sh", b"#!/bin/bash\r\necho ready\r\n")
    config = changed(account.config(), ("VpcConfig.Subnets", [subnet_id]))
    body = CreateClusterBody.model_validate(
        {
            "clusterConfig": config,
            "provisioningParameters": account.provisioning(),
            "owner": "ann",
            "project": "llm-pretraining",
        }
    )
    deps, started = _api("Enabled")
    with pytest.raises(InvalidRequestError) as refused:
        create_cluster(deps, body, requested_by="ann")
    assert [(e.path, e.message) for e in refused.value.errors] == [
        (p.path, p.message) for p in check(config, account.provisioning()).errors
    ]
    assert [e.path for e in refused.value.errors] == [
        "VpcConfig.Subnets[0]",
        f"{LIFECYCLE}.OnCreate",
        "InstanceGroups[2].InstanceCount",
    ]
    assert (started, deps.store.get_cluster("ml-cluster")) == ([], None)  # nothing created
    # Disabled (the template's default): the API checks the documents only, as before.
    deps, started = _api("Disabled")
    create_cluster(deps, body, requested_by="ann")
    assert len(started) == 1


def test_the_apis_validate_warns_of_an_online_check_that_could_not_run(account: Account) -> None:
    config = changed(account.config(), ("InstanceGroups[1].InstanceType", "ml.g6e.48xlarge"))
    deps, _ = _api("Enabled")
    body = {"clusterConfig": config, "provisioningParameters": account.provisioning()}
    result = validate_body(deps, ValidateBody.model_validate(body))
    assert (result.valid, result.errors) == (True, [])
    assert [(w.path, w.message) for w in result.warnings] == [
        (
            "InstanceGroups[1].InstanceCount",
            "could not check the quota for ml.g6e.48xlarge: Service Quotas lists no "
            f"'ml.g6e.48xlarge for cluster usage' quota in {REGION}",
        )
    ]


# --- the Slurm agent on the controller (docs/agent.md) ---------------------------------------------------
API = "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/dev"
CONTROLLER_ROLE = "autopilot-agent-controller-role"
ROUTE = f"arn:aws:execute-api:us-west-2:{ACCOUNT}:a1b2c3d4e5/dev/POST/agent/ml-cluster/reports"


def _with_agent(account: Account) -> None:
    _upload(account, "src/autopilot-agent/install.sh", b"#!/bin/bash\n")


def _own_controller_role(config: dict[str, Any]) -> dict[str, Any]:
    iam = boto3.client("iam")
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=CONTROLLER_ROLE, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))
    arn = f"arn:aws:iam::{ACCOUNT}:role/{CONTROLLER_ROLE}"
    return changed(config, ("InstanceGroups[0].ExecutionRole", arn))


def test_the_agents_role_is_not_checked_where_the_agent_is_not_installed(account: Account) -> None:
    report = check(account.config(), account.provisioning(), api_endpoint=API)
    assert (errors(report), warnings(report), unchecked(report)) == ([], [], [])


def test_a_controller_role_shared_with_other_groups_is_a_warning_once_the_agent_is_installed(
    account: Account,
) -> None:
    _with_agent(account)
    report = check(account.config(), account.provisioning(), api_endpoint=API)
    assert report.valid
    assert messages_at(warnings(report), "InstanceGroups[0].ExecutionRole") == [
        "the Slurm controller's role is also the role of login-group, worker-group-1: any job there can "
        "read its credentials and report to Autopilot as the controller's agent; give the controller group "
        "a role of its own (docs/agent.md)"
    ]
    assert (
        check(_own_controller_role(account.config()), account.provisioning(), api_endpoint=API).warnings == []
    )


@pytest.mark.parametrize(
    ("decision", "verb"), [("implicitDeny", "is not allowed"), ("explicitDeny", "is denied")]
)
def test_a_controller_role_that_may_not_call_the_agents_route_is_a_warning(
    account: Account, decision: str, verb: str
) -> None:
    _with_agent(account)
    GAPS.decisions = {("execute-api:Invoke", ROUTE): decision}
    report = check(_own_controller_role(account.config()), account.provisioning(), api_endpoint=API)
    assert report.valid
    assert warnings(report) == [
        (
            C,
            "InstanceGroups[0].ExecutionRole",
            f"role {CONTROLLER_ROLE} {verb} execute-api:Invoke on {ROUTE}: the Slurm agent installed on "
            "the controller cannot report, so repairs go on without Slurm (docs/agent.md has the policy "
            "statement)",
        )
    ]


def test_without_autopilots_endpoint_the_agents_route_is_unchecked(account: Account) -> None:
    _with_agent(account)
    report = check(_own_controller_role(account.config()), account.provisioning())
    assert [message for _, _, message in unchecked(report)] == [
        "whether the role may call the Slurm agent's route (execute-api:Invoke): Autopilot's API endpoint is "
        "not known (pass --endpoint or run `autopilot configure`)"
    ]
