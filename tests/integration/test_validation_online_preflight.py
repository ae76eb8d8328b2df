"""The --aws preflight checks on moto: what makes a create fail after it has started (issue 23): routes to
S3, quotas, lifecycle scripts, subnet sizes, and the CLI and the API running them."""

# ruff: noqa: F811  (the tests name fixtures imported from validation_online_support.py)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import boto3
import pytest
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.errors import InvalidRequestError
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.validate_config import validate_config as validate_body
from autopilot.models.bodies import CreateClusterBody, ValidateBody
from autopilot.settings import ApiSettings
from autopilot_cli.main import main
from botocore.stub import Stubber

from tests.integration.validation_online_support import (
    GAPS,
    LIFECYCLE,
    ROLE_NAME,
    Account,
    C,
    _upload,
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
    unchecked,
    warnings,
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
