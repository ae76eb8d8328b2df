"""The --aws checks against moto (and botocore's Stubber where moto lacks a field or an error): the
network, FSx, lifecycle scripts, roles, checks that cannot run, the region, the CLI (moto's gaps: support)."""

# ruff: noqa: F811  (the tests name fixtures imported from validation_online_support.py)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from autopilot_cli.main import main
from autopilot_config.validation import (
    OnlineChecker,
    validate_config,
)
from botocore.stub import Stubber

from tests.integration.validation_online_support import (
    LIFECYCLE,
    ROLE_NAME,
    SAGEMAKER_TRUST,
    Account,
    C,
    P,
    account,  # noqa: F401 (a fixture the tests name)
    check,
    moto,  # noqa: F401 (the fixture account needs)
)
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
