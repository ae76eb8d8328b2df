"""What test_validation_online*.py share: moto with MotoGaps, the Account the checks run against, check.

moto 5.2.5 knows no SageMaker quotas (Service Quotas answers only for vpc) and has no IAM policy
simulator: MotoGaps answers those calls, after botocore has validated the request and with responses
validated against botocore's output shapes, from what each test sets.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.handlers
import pytest
from autopilot import aws
from autopilot_config.validation import (
    CLUSTER_CONFIG,
    PROVISIONING_PARAMETERS,
    OnlineChecker,
    validate_config,
)
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import NoCredentialsError
from botocore.validate import validate_parameters
from moto import mock_aws

from tests.unit.validation.builders import (
    REGION,
    changed,
    slurm_config,
    slurm_provisioning,
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


def _upload(account: Account, key: str, body: bytes) -> None:
    boto3.client("s3", region_name=REGION).put_object(Bucket=account.bucket, Key=key, Body=body)


# Autopilot's API endpoint (what the preflight and the agent tests call)
API = "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/dev"
