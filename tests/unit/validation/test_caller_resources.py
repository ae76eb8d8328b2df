"""The confused-deputy checks' core (autopilot.caller_resources) and the EKS allowlist
(autopilot_config.validation.eks_clusters), on botocore clients whose answers a Stubber gives: each request
is checked against the service model, nothing reaches AWS."""

from __future__ import annotations

import copy
from typing import Any

import boto3
import pytest
from autopilot.caller_resources import PASSED_TO, CallerResourceChecker
from autopilot_config.validation import EksClusterPolicy, ExecutionRolePolicy
from autopilot_config.validation.documents import ClusterDocuments
from autopilot_config.validation.findings import Findings
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from tests.samples import create_body

ACCOUNT = "123456789012"
REGION = "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/sagemaker-hyperpod-execution-role"
BUCKET = "sagemaker-lifecycle-123456789012"
SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_ML_0123456789abcdef/alice"
SESSION_ROLE = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_ML_0123456789abcdef"
)
USER = f"arn:aws:iam::{ACCOUNT}:user/teams/bob"
ROLE_PATHS = [f"InstanceGroups[{i}].ExecutionRole" for i in range(3)]
PASS_ROLE_CONTEXT = [
    {"ContextKeyName": "iam:PassedToService", "ContextKeyValues": [PASSED_TO], "ContextKeyType": "string"}
]


class Stubs:
    def __init__(self) -> None:
        options: dict[str, Any] = {
            "region_name": REGION,
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        self.iam = boto3.client("iam", **options)
        self.s3 = boto3.client("s3", **options)
        self.ec2 = boto3.client("ec2", **options)
        self.stubbers = {name: Stubber(getattr(self, name)) for name in ("iam", "s3", "ec2")}
        for stubber in self.stubbers.values():
            stubber.activate()
        self.checker = CallerResourceChecker(account=ACCOUNT, iam=self.iam, s3=self.s3, ec2=self.ec2)

    def answer(self, service: str, operation: str, response: dict[str, Any], params: Any = None) -> None:
        self.stubbers[service].add_response(operation, response, params)

    def fail(self, service: str, operation: str, code: str, status: int = 400) -> None:
        self.stubbers[service].add_client_error(operation, service_error_code=code, http_status_code=status)

    def simulated(self, decision: str, source: str = SESSION_ROLE) -> None:
        self.answer(
            "iam",
            "simulate_principal_policy",
            {"EvaluationResults": [{"EvalActionName": "iam:PassRole", "EvalDecision": decision}]},
            {
                "PolicySourceArn": source,
                "ActionNames": ["iam:PassRole"],
                "ResourceArns": [ROLE],
                "ContextEntries": PASS_ROLE_CONTEXT,
            },
        )

    def session_role(self) -> None:
        role = {
            "Path": "/aws-reserved/sso.amazonaws.com/",
            "RoleName": "AWSReservedSSO_ML_0123456789abcdef",
            "RoleId": "AROAEXAMPLEEXAMPLE001",
            "Arn": SESSION_ROLE,
            "CreateDate": "2026-01-01T00:00:00Z",
        }
        self.answer("iam", "get_role", {"Role": role}, {"RoleName": "AWSReservedSSO_ML_0123456789abcdef"})

    def role_exists(self, arn: str = ROLE) -> None:
        """GetRole of a role the request names: IAM spells it as the request does."""
        path, name = arn.split(":role", 1)[1].rsplit("/", 1)
        role = {
            "Path": f"{path}/",
            "RoleName": name,
            "RoleId": "AROAEXAMPLEEXAMPLE002",
            "Arn": arn,
            "CreateDate": "2026-01-01T00:00:00Z",
        }
        self.answer("iam", "get_role", {"Role": role}, {"RoleName": name})

    def bucket_ours(self) -> None:
        self.answer("s3", "get_bucket_location", {}, {"Bucket": BUCKET, "ExpectedBucketOwner": ACCOUNT})

    def subnet(self, subnet_id: str, vpc: str = "vpc-a", owner: str = ACCOUNT) -> None:
        self.answer(
            "ec2",
            "describe_subnets",
            {"Subnets": [{"SubnetId": subnet_id, "VpcId": vpc, "OwnerId": owner}]},
            {"SubnetIds": [subnet_id]},
        )

    def security_group(self, group_id: str, vpc: str = "vpc-a", owner: str = ACCOUNT) -> None:
        self.answer(
            "ec2",
            "describe_security_groups",
            {"SecurityGroups": [{"GroupId": group_id, "VpcId": vpc, "OwnerId": owner}]},
            {"GroupIds": [group_id]},
        )

    def network_ours(self) -> None:
        self.subnet("subnet-0123456789abcdef0")
        self.security_group("sg-0123456789abcdef0")

    def check(self, docs: ClusterDocuments, caller: str | None = SESSION, *, admin: bool = False) -> Any:
        refusals = self.checker.check(docs, caller, admin=admin)
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()
        return refusals


@pytest.fixture
def stubs() -> Stubs:
    return Stubs()


def documents(**changes: Any) -> ClusterDocuments:
    body = copy.deepcopy(create_body())
    body["clusterConfig"].update(changes)
    return ClusterDocuments(body["clusterConfig"], body["provisioningParameters"])


def paths(problems: list[Any]) -> list[str]:
    return [p.path for p in problems]


def test_a_caller_whose_policies_allow_pass_role_may_use_the_role(stubs: Stubs) -> None:
    stubs.session_role()  # an Identity Center session: its role's ARN with its path, from GetRole
    stubs.role_exists()
    stubs.simulated("allowed")  # once for the three groups' one role
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents())
    assert (refusals.forbidden, refusals.invalid) == ([], [])


@pytest.mark.parametrize(
    ("decision", "says"), [("implicitDeny", "do not allow"), ("explicitDeny", "explicitly deny")]
)
def test_a_caller_whose_policies_do_not_allow_pass_role_is_forbidden_each_role_field(
    stubs: Stubs, decision: str, says: str
) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.simulated(decision)
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents())
    assert paths(refusals.forbidden) == ROLE_PATHS
    assert refusals.forbidden[0].message == (
        f"the caller ({SESSION}) may not pass this role: IAM's policy simulator says {SESSION_ROLE}'s "
        f"policies {says} iam:PassRole on {ROLE} to sagemaker.amazonaws.com. Autopilot passes only roles its "
        "caller may pass (or any role, for the stack's AdminPrincipalArns)"
    )


def test_an_iam_user_is_simulated_as_itself_and_the_cluster_role_is_checked_too(stubs: Stubs) -> None:
    cluster_role = f"arn:aws:iam::{ACCOUNT}:role/hyperpod-cluster-role"
    stubs.role_exists()
    stubs.role_exists(cluster_role)
    stubs.simulated("allowed", source=USER)
    stubs.answer(
        "iam",
        "simulate_principal_policy",
        {"EvaluationResults": [{"EvalActionName": "iam:PassRole", "EvalDecision": "implicitDeny"}]},
        {
            "PolicySourceArn": USER,
            "ActionNames": ["iam:PassRole"],
            "ResourceArns": [cluster_role],
            "ContextEntries": ANY,
        },
    )
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents(ClusterRole=cluster_role), USER)
    assert paths(refusals.forbidden) == ["ClusterRole"]


def test_admins_and_the_account_root_pass_any_role_without_a_simulation(stubs: Stubs) -> None:
    for caller, admin in ((SESSION, True), (f"arn:aws:iam::{ACCOUNT}:root", False)):
        stubs.bucket_ours()
        stubs.network_ours()
        refusals = stubs.check(documents(), caller, admin=admin)
        assert (refusals.forbidden, refusals.invalid) == ([], []), caller


@pytest.mark.parametrize(
    ("caller", "why"),
    [
        (None, "the caller is unknown"),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/eve", "not a federated-user"),
        ("arn:aws:sts::210987654321:assumed-role/Ops/eve", "is not a principal of this account"),
    ],
)
def test_a_caller_iam_cannot_simulate_is_forbidden_unless_an_admin(
    stubs: Stubs, caller: str | None, why: str
) -> None:
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents(), caller)
    assert paths(refusals.forbidden) == ROLE_PATHS
    assert why in refusals.forbidden[0].message


def test_autopilots_own_role_denied_the_simulation_refuses_with_a_clear_message(stubs: Stubs) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.fail("iam", "simulate_principal_policy", "AccessDenied", 403)
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents())
    assert paths(refusals.forbidden) == ROLE_PATHS
    assert refusals.forbidden[0].message == (
        "Autopilot could not check it: its own role may not call iam:SimulatePrincipalPolicy (AccessDenied); "
        "the stack's ApiCallerChecksPolicy grants it"
    )


def test_throttling_is_raised_for_the_api_to_answer_503(stubs: Stubs) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.fail("iam", "simulate_principal_policy", "Throttling", 400)
    with pytest.raises(ClientError) as raised:
        stubs.checker.check(documents(), SESSION)
    assert raised.value.response["Error"]["Code"] == "Throttling"


@pytest.mark.parametrize(
    ("code", "status", "says"),
    [
        ("AccessDenied", 403, "is not this account's (123456789012)"),
        ("NoSuchBucket", 404, "does not exist: whoever creates a bucket of that name next"),
    ],
)
def test_a_bucket_of_another_account_or_of_nobody_is_invalid(
    stubs: Stubs, code: str, status: int, says: str
) -> None:
    stubs.fail("s3", "get_bucket_location", code, status)  # once: the three groups share the bucket
    stubs.network_ours()
    refusals = stubs.check(documents(), admin=True)
    assert paths(refusals.invalid) == [f"InstanceGroups[{i}].LifeCycleConfig.SourceS3Uri" for i in range(3)]
    assert says in refusals.invalid[0].message


def test_subnets_and_security_groups_must_be_this_accounts_and_in_the_clusters_vpc(stubs: Stubs) -> None:
    vpc = {
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1", "subnet-0123456789abcdef2"],
        "SecurityGroupIds": ["sg-0123456789abcdef0", "sg-0123456789abcdef1", "sg-0123456789abcdef2"],
    }
    stubs.bucket_ours()
    stubs.subnet("subnet-0123456789abcdef0")
    stubs.subnet("subnet-0123456789abcdef1", vpc="vpc-b")
    stubs.subnet("subnet-0123456789abcdef2", owner="210987654321")  # shared with this account (RAM)
    stubs.security_group("sg-0123456789abcdef0")
    stubs.security_group("sg-0123456789abcdef1", vpc="vpc-b")
    stubs.fail("ec2", "describe_security_groups", "InvalidGroup.NotFound")  # SageMaker refuses it itself
    refusals = stubs.check(documents(VpcConfig=vpc), admin=True)
    assert [(p.path, p.message) for p in refusals.invalid] == [
        (
            "VpcConfig.Subnets[1]",
            "subnet subnet-0123456789abcdef1 is in vpc-b, not the cluster's VPC vpc-a (that of "
            "VpcConfig.Subnets): a cluster's subnets are in one VPC",
        ),
        (
            "VpcConfig.Subnets[2]",
            "subnet subnet-0123456789abcdef2 is account 210987654321's (shared with this one); a cluster's "
            "subnets must be this account's (123456789012)",
        ),
        (
            "VpcConfig.SecurityGroupIds[1]",
            "security group sg-0123456789abcdef1 is in vpc-b, not the cluster's VPC vpc-a: a security "
            "group applies only to its own VPC's instances",
        ),
    ]


def test_an_override_vpc_configs_security_group_is_held_to_the_clusters_vpc(stubs: Stubs) -> None:
    config = copy.deepcopy(create_body()["clusterConfig"])
    config["InstanceGroups"][2]["OverrideVpcConfig"] = {
        "Subnets": ["subnet-0123456789abcdef0"],
        "SecurityGroupIds": ["sg-0fedcba9876543210"],
    }
    stubs.bucket_ours()
    stubs.subnet("subnet-0123456789abcdef0")
    stubs.subnet("subnet-0123456789abcdef0")
    stubs.security_group("sg-0123456789abcdef0")
    stubs.security_group("sg-0fedcba9876543210", vpc="vpc-finance")
    refusals = stubs.check(ClusterDocuments(config, None), admin=True)
    assert paths(refusals.invalid) == ["InstanceGroups[2].OverrideVpcConfig.SecurityGroupIds[0]"]


def eks_findings(arn: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
    config = {"ClusterName": "c", "Orchestrator": {"Eks": {"ClusterArn": arn}}, "InstanceGroups": []}
    findings = Findings()
    EksClusterPolicy(names, ACCOUNT, REGION).check(ClusterDocuments(config, None), findings)
    return [(p.path, p.message) for p in findings.report().errors]


def test_an_eks_cluster_must_be_one_of_the_stacks_eks_cluster_names() -> None:
    arn = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/"
    assert eks_findings(arn + "ml-eks", ("ml-eks", "team-*")) == []
    assert eks_findings(arn + "team-vision", ("ml-eks", "team-*")) == []
    assert eks_findings(arn + "finance", ("ml-eks", "team-*")) == [
        (
            "Orchestrator.Eks.ClusterArn",
            "EKS cluster 'finance' is not one of this Autopilot stack's EksClusterNames (ml-eks, team-*)",
        )
    ]
    assert eks_findings(arn + "ml-eks", ()) == [
        (
            "Orchestrator.Eks.ClusterArn",
            "this Autopilot stack allows no EKS orchestrator (its EksClusterNames parameter is empty); "
            "ask its administrator to add the cluster",
        )
    ]
    assert eks_findings(f"arn:aws:eks:{REGION}:210987654321:cluster/ml-eks", ("*",)) == [
        (
            "Orchestrator.Eks.ClusterArn",
            "is in account 210987654321; this Autopilot stack may use only EKS clusters of its own account "
            "(123456789012)",
        )
    ]
    # the ARN rules' to report
    assert eks_findings(f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/ml-eks", ()) == []


def test_any_other_refusal_of_a_check_refuses_the_request_rather_than_failing_it(stubs: Stubs) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.fail("iam", "simulate_principal_policy", "NoSuchEntity", 404)  # the caller's role went meanwhile
    stubs.fail("s3", "get_bucket_location", "InvalidRequest", 400)
    stubs.fail("ec2", "describe_subnets", "UnauthorizedOperation", 403)
    refusals = stubs.check(documents())
    assert paths(refusals.forbidden) == [*ROLE_PATHS, "VpcConfig"]
    assert refusals.forbidden[0].message.startswith(
        "Autopilot could not check it: iam:SimulatePrincipalPolicy answered NoSuchEntity"
    )
    assert refusals.forbidden[-1].message.startswith(
        "Autopilot could not check it: its own role may not call ec2:DescribeSubnets (UnauthorizedOperation)"
    )
    assert paths(refusals.invalid) == [f"InstanceGroups[{i}].LifeCycleConfig.SourceS3Uri" for i in range(3)]
    assert refusals.invalid[0].message == (
        f"could not check that bucket {BUCKET} is this account's: S3 answered InvalidRequest"
    )


def test_s3_or_ec2_failing_is_raised_for_the_api_to_answer_503(stubs: Stubs) -> None:
    stubs.fail("s3", "get_bucket_location", "InternalError", 500)
    with pytest.raises(ClientError):
        stubs.checker.check(documents(), SESSION, admin=True)
    stubs.bucket_ours()
    stubs.fail("ec2", "describe_subnets", "RequestLimitExceeded", 503)
    with pytest.raises(ClientError):
        stubs.checker.check(documents(), SESSION, admin=True)


def test_login_target_groups_need_the_callers_own_register_targets(stubs: Stubs) -> None:
    arns = [
        f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/autopilot-login-{n}/0123456789abcdef"
        for n in "ab"
    ]
    stubs.answer(
        "iam",
        "simulate_principal_policy",
        {
            "EvaluationResults": [
                {"EvalActionName": "elasticloadbalancing:RegisterTargets", "EvalDecision": "allowed"}
            ]
        },
        {
            "PolicySourceArn": USER,
            "ActionNames": ["elasticloadbalancing:RegisterTargets"],
            "ResourceArns": [arns[0]],
            "ContextEntries": [],
        },
    )
    stubs.answer(
        "iam",
        "simulate_principal_policy",
        {
            "EvaluationResults": [
                {"EvalActionName": "elasticloadbalancing:RegisterTargets", "EvalDecision": "explicitDeny"}
            ]
        },
        {
            "PolicySourceArn": USER,
            "ActionNames": ["elasticloadbalancing:RegisterTargets"],
            "ResourceArns": [arns[1]],
            "ContextEntries": [],
        },
    )
    assert stubs.checker.check_target_groups(arns, USER) == [
        (
            1,
            f"the caller ({USER}) may not register targets in this target group: IAM's policy simulator says "
            f"{USER}'s policies explicitly deny elasticloadbalancing:RegisterTargets on it. Autopilot puts "
            "login nodes only into target groups its caller may",
        )
    ]
    assert stubs.checker.check_target_groups(arns, f"arn:aws:iam::{ACCOUNT}:root") == []
    assert [i for i, _ in stubs.checker.check_target_groups(arns, None)] == [0, 1]
    stubs.fail("iam", "simulate_principal_policy", "AccessDenied", 403)
    assert [why for _, why in stubs.checker.check_target_groups(arns, USER)] == [
        "Autopilot could not check it: its own role may not call iam:SimulatePrincipalPolicy (AccessDenied); "
        "the stack's ApiCallerChecksPolicy grants it"
    ] * 2


def test_the_cluster_role_must_match_the_stacks_execution_role_patterns_too() -> None:
    config = {
        "ClusterName": "ml-cluster",
        "InstanceGroups": [
            {"InstanceGroupName": "g", "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/HyperPodExec"}
        ],
        "ClusterRole": f"arn:aws:iam::{ACCOUNT}:role/AnyOtherRole",
    }
    findings = Findings()
    ExecutionRolePolicy(account=ACCOUNT).check(ClusterDocuments(config, None), findings)
    assert [(p.path, "ExecutionRoleNamePatterns" in p.message) for p in findings.report().errors] == [
        ("ClusterRole", True)
    ]


def test_a_role_value_that_is_not_a_role_arn_is_refused_not_skipped(stubs: Stubs) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.simulated("allowed")
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents(ClusterRole=f"arn:aws:iam::{ACCOUNT}:user/not-a-role"))
    assert (refusals.forbidden, paths(refusals.invalid)) == ([], ["ClusterRole"])
    assert "is not an IAM role ARN" in refusals.invalid[0].message


@pytest.mark.parametrize(
    "named",
    [
        ROLE.replace("sagemaker-hyperpod", "SageMaker-HyperPod"),  # IAM's names: unique whatever the case
        f"arn:aws:iam::{ACCOUNT}:role/sagemaker-hyperpod-execution-role",  # the role has a path
    ],
)
def test_a_role_named_otherwise_than_iam_spells_it_is_refused_before_any_simulation(
    stubs: Stubs, named: str
) -> None:
    actual = f"arn:aws:iam::{ACCOUNT}:role/team/sagemaker-hyperpod-execution-role"
    if named == ROLE.replace("sagemaker-hyperpod", "SageMaker-HyperPod"):
        actual = ROLE
    stubs.session_role()
    stubs.answer(
        "iam",
        "get_role",
        {
            "Role": {
                "Path": "/",
                "RoleName": actual.rsplit("/", 1)[-1],
                "RoleId": "AROAEXAMPLEEXAMPLE003",
                "Arn": actual,
                "CreateDate": "2026-01-01T00:00:00Z",
            }
        },
        {"RoleName": named.rsplit("/", 1)[-1]},
    )
    stubs.bucket_ours()
    stubs.network_ours()
    group = documents().config["InstanceGroups"][0] | {"ExecutionRole": named}
    refusals = stubs.check(documents(InstanceGroups=[group]))
    assert (refusals.forbidden, paths(refusals.invalid)) == ([], ["InstanceGroups[0].ExecutionRole"])
    assert refusals.invalid[0].message.startswith(f"IAM names this role {actual}")


def test_an_allow_that_depends_on_a_missing_context_value_is_not_an_allow(stubs: Stubs) -> None:
    stubs.session_role()
    stubs.role_exists()
    stubs.answer(
        "iam",
        "simulate_principal_policy",
        {
            "EvaluationResults": [
                {
                    "EvalActionName": "iam:PassRole",
                    "EvalDecision": "allowed",
                    "MissingContextValues": ["aws:SourceIp"],
                }
            ]
        },
    )
    stubs.bucket_ours()
    stubs.network_ours()
    refusals = stubs.check(documents())
    assert paths(refusals.forbidden) == ROLE_PATHS
