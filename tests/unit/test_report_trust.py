"""Who may report for a cluster (autopilot.logic.agent.trust): the controller group's execution role
only, of the stack's account, from one of the controller's instances. SageMaker's and S3's answers come
from botocore's Stubber, so every request and response is checked against the service model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from autopilot.errors import ConflictError, NotFoundError
from autopilot.logic.agent.trust import ControllerReader, UntrustedReportError, check_reporter
from botocore.stub import ANY, Stubber

ACCOUNT = "111122223333"
CLUSTER = "ml-cluster"
CLUSTER_ARN = f"arn:aws:sagemaker:us-west-2:{ACCOUNT}:cluster/abc123def456"
CONTROLLER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/service-role/ml-cluster-controller-role"
WORKER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/ml-cluster-worker-role"
CONTROLLER_INSTANCE = "i-0a1b2c3d4e5f60718"
WORKER_INSTANCE = "i-0fedcba9876543210"
LIFECYCLE = "s3://sagemaker-lifecycle-bucket/scripts/"


def group(name: str, role: str, node_type: str | None = None) -> dict[str, Any]:
    described: dict[str, Any] = {
        "InstanceGroupName": name,
        "InstanceType": "ml.p5.48xlarge" if name == "workers" else "ml.m5.xlarge",
        "CurrentCount": 1,
        "TargetCount": 1,
        "ExecutionRole": role,
        "LifeCycleConfig": {"SourceS3Uri": LIFECYCLE, "OnCreate": "on_create.sh"},
    }
    if node_type:
        described["SlurmConfig"] = {"NodeType": node_type}
    return described


def described(*groups: dict[str, Any], eks: bool = False) -> dict[str, Any]:
    orchestrator = (
        {"Eks": {"ClusterArn": f"arn:aws:eks:us-west-2:{ACCOUNT}:cluster/eks"}} if eks else {"Slurm": {}}
    )
    return {
        "ClusterArn": CLUSTER_ARN,
        "ClusterName": CLUSTER,
        "ClusterStatus": "InService",
        "InstanceGroups": list(groups),
        "Orchestrator": orchestrator,
    }


SLURM_GROUPS = (
    group("controller-machine", CONTROLLER_ROLE, "Controller"),
    group("workers", WORKER_ROLE, "Compute"),
)


def node(instance_id: str, group_name: str) -> dict[str, Any]:
    return {
        "InstanceGroupName": group_name,
        "InstanceId": instance_id,
        "InstanceType": "ml.m5.xlarge",
        "LaunchTime": datetime(2026, 11, 27, tzinfo=UTC),
        "InstanceStatus": {"Status": "Running"},
    }


class Stubs:
    def __init__(self) -> None:
        self.sagemaker = boto3.client("sagemaker", region_name="us-west-2")
        self.s3 = boto3.client("s3", region_name="us-west-2")
        self.sagemaker_stub = Stubber(self.sagemaker)
        self.s3_stub = Stubber(self.s3)
        self.reader = ControllerReader(sagemaker=self.sagemaker, s3=self.s3)

    def cluster(self, answer: dict[str, Any]) -> None:
        self.sagemaker_stub.add_response("describe_cluster", answer, {"ClusterName": CLUSTER})

    def nodes(self, group_name: str, *nodes: dict[str, Any]) -> None:
        self.sagemaker_stub.add_response(
            "list_cluster_nodes",
            {"ClusterNodeSummaries": list(nodes)},
            {"ClusterName": CLUSTER, "InstanceGroupNameContains": group_name},
        )


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    made = Stubs()
    with made.sagemaker_stub, made.s3_stub:
        yield made
        made.sagemaker_stub.assert_no_pending_responses()
        made.s3_stub.assert_no_pending_responses()


def session(role: str, name: str, account: str = ACCOUNT) -> str:
    return f"arn:aws:sts::{account}:assumed-role/{role.rsplit('/', 1)[-1]}/{name}"


def test_the_controller_instances_role_may_report(stubs: Stubs) -> None:
    stubs.cluster(described(*SLURM_GROUPS))
    # a workers' node of a similar group name is not the controller's
    stubs.nodes(
        "controller-machine",
        node(CONTROLLER_INSTANCE, "controller-machine"),
        node(WORKER_INSTANCE, "controller-machine-2"),
    )
    caller = session(CONTROLLER_ROLE, CONTROLLER_INSTANCE)
    assert check_reporter(stubs.reader, CLUSTER, caller, account=ACCOUNT) == CONTROLLER_INSTANCE


def test_a_session_not_named_as_an_instance_is_judged_by_its_role(stubs: Stubs) -> None:
    stubs.cluster(described(*SLURM_GROUPS))
    caller = session(CONTROLLER_ROLE, "autopilot-agent")
    assert check_reporter(stubs.reader, CLUSTER, caller, account=ACCOUNT) == "autopilot-agent"


@pytest.mark.parametrize(
    ("caller", "why"),
    [
        (
            session(f"arn:aws:iam::{ACCOUNT}:role/other-cluster-controller", CONTROLLER_INSTANCE),
            "not the execution role",
        ),
        (session(WORKER_ROLE, WORKER_INSTANCE), "not the execution role"),
        # IAM role names are unique in an account whatever their path, so the name alone is the role
    ],
    ids=["another clusters role", "a worker-only role"],
)
def test_every_other_role_is_refused(stubs: Stubs, caller: str | None, why: str) -> None:
    stubs.cluster(described(*SLURM_GROUPS))
    with pytest.raises(UntrustedReportError, match=why):
        check_reporter(stubs.reader, CLUSTER, caller, account=ACCOUNT)


@pytest.mark.parametrize(
    ("caller", "why"),
    [
        (session(CONTROLLER_ROLE, CONTROLLER_INSTANCE, account="999988887777"), "another account"),
        (f"arn:aws:iam::{ACCOUNT}:user/alice", "not an assumed role"),
        (f"arn:aws:iam::{ACCOUNT}:root", "not an assumed role"),
        (f"arn:aws:sts::{ACCOUNT}:federated-user/bob", "not an assumed role"),
        (None, "not an assumed role"),
    ],
    ids=["another account", "an IAM user", "root", "a federated user", "no caller"],
)
def test_a_caller_not_an_assumed_role_of_the_account_is_refused_before_sagemaker_is_asked(
    stubs: Stubs, caller: str | None, why: str
) -> None:
    # no DescribeCluster queued: the Stubber fails the test if the cluster is looked up (its existence
    # or kind would otherwise show through as a 404 or 409)
    for cluster in (CLUSTER, "no-such-cluster"):
        with pytest.raises(UntrustedReportError, match=why):
            check_reporter(stubs.reader, cluster, caller, account=ACCOUNT)


def test_a_session_not_named_as_an_instance_is_refused_when_another_group_has_the_role(
    stubs: Stubs,
) -> None:
    # the workers' jobs can read the shared role's credentials from IMDS and name their session freely
    shared = (
        group("controller-machine", CONTROLLER_ROLE, "Controller"),
        group("workers", WORKER_ROLE, "Compute"),
        group("login", CONTROLLER_ROLE, "Login"),
    )
    stubs.cluster(described(*shared))
    with pytest.raises(UntrustedReportError, match=r"session names no instance.*'login'"):
        check_reporter(stubs.reader, CLUSTER, session(CONTROLLER_ROLE, "autopilot-agent"), account=ACCOUNT)
    # a session named as the controller's own instance still reports
    stubs.cluster(described(*shared))
    stubs.nodes("controller-machine", node(CONTROLLER_INSTANCE, "controller-machine"))
    caller = session(CONTROLLER_ROLE, CONTROLLER_INSTANCE)
    assert check_reporter(stubs.reader, CLUSTER, caller, account=ACCOUNT) == CONTROLLER_INSTANCE


def test_the_controller_role_from_another_instance_is_refused(stubs: Stubs) -> None:
    # a worker sharing the controller's role (validate warns of it) still cannot report as itself
    stubs.cluster(described(*SLURM_GROUPS))
    stubs.nodes("controller-machine", node(CONTROLLER_INSTANCE, "controller-machine"))
    with pytest.raises(UntrustedReportError, match="not an instance of the controller group"):
        check_reporter(stubs.reader, CLUSTER, session(CONTROLLER_ROLE, WORKER_INSTANCE), account=ACCOUNT)


def test_an_eks_cluster_has_no_agent(stubs: Stubs) -> None:
    stubs.cluster(described(group("workers", WORKER_ROLE), eks=True))
    with pytest.raises(ConflictError, match="EKS"):
        check_reporter(stubs.reader, CLUSTER, session(WORKER_ROLE, WORKER_INSTANCE), account=ACCOUNT)


def test_a_cluster_without_a_controller_group_is_a_conflict(stubs: Stubs) -> None:
    stubs.cluster(described(group("controller-machine", CONTROLLER_ROLE), group("workers", WORKER_ROLE)))
    # no SlurmConfig: the lifecycle prefix's provisioning_parameters.json is read, and is missing
    stubs.s3_stub.add_client_error("get_object", "NoSuchKey", http_status_code=404)
    with pytest.raises(ConflictError, match="no controller group"):
        check_reporter(stubs.reader, CLUSTER, session(CONTROLLER_ROLE, CONTROLLER_INSTANCE), account=ACCOUNT)


def test_the_controller_group_is_read_from_the_provisioning_parameters_once(stubs: Stubs) -> None:
    groups = (group("head", CONTROLLER_ROLE), group("workers", WORKER_ROLE))
    stubs.cluster(described(*groups))
    body = b'{"version": "1.0.0", "workload_manager": "slurm", "controller_group": "head"}'
    stubs.s3_stub.add_response(
        "get_object",
        {"Body": _streaming(body)},
        {"Bucket": "sagemaker-lifecycle-bucket", "Key": "scripts/provisioning_parameters.json"},
    )
    assert (
        check_reporter(stubs.reader, CLUSTER, session(CONTROLLER_ROLE, "agent"), account=ACCOUNT) == "agent"
    )
    stubs.cluster(described(*groups))  # another caller: DescribeCluster again, not S3
    with pytest.raises(UntrustedReportError):
        check_reporter(stubs.reader, CLUSTER, session(WORKER_ROLE, "agent"), account=ACCOUNT)


def test_the_controller_is_taken_as_such_for_a_minute_and_a_refusal_is_always_fresh(stubs: Stubs) -> None:
    now = [datetime(2026, 11, 27, 21, 0, tzinfo=UTC)]
    reader = ControllerReader(sagemaker=stubs.sagemaker, s3=stubs.s3, now=lambda: now[0])
    controller = session(CONTROLLER_ROLE, CONTROLLER_INSTANCE)
    stubs.cluster(described(*SLURM_GROUPS))
    stubs.nodes("controller-machine", node(CONTROLLER_INSTANCE, "controller-machine"))
    assert check_reporter(reader, CLUSTER, controller, account=ACCOUNT) == CONTROLLER_INSTANCE
    now[0] += timedelta(seconds=59)  # the next polls ask SageMaker nothing
    assert check_reporter(reader, CLUSTER, controller, account=ACCOUNT) == CONTROLLER_INSTANCE
    stubs.cluster(described(*SLURM_GROUPS))  # ...but another caller is judged on SageMaker's answer
    with pytest.raises(UntrustedReportError):
        check_reporter(reader, CLUSTER, session(WORKER_ROLE, WORKER_INSTANCE), account=ACCOUNT)
    # a minute on, the controller group has another role: the old one is refused
    now[0] += timedelta(seconds=2)
    stubs.cluster(described(group("controller-machine", WORKER_ROLE, "Controller")))
    with pytest.raises(UntrustedReportError, match="not the execution role"):
        check_reporter(reader, CLUSTER, controller, account=ACCOUNT)


def test_an_unknown_cluster_is_not_found(stubs: Stubs) -> None:
    stubs.sagemaker_stub.add_client_error(
        "describe_cluster", "ResourceNotFound", http_status_code=400, expected_params={"ClusterName": ANY}
    )
    with pytest.raises(NotFoundError):
        check_reporter(stubs.reader, CLUSTER, session(CONTROLLER_ROLE, "agent"), account=ACCOUNT)
    # a name no cluster can have is not even asked about
    with pytest.raises(NotFoundError):
        check_reporter(stubs.reader, "../x", session(CONTROLLER_ROLE, "agent"), account=ACCOUNT)


def _streaming(body: bytes) -> Any:
    from io import BytesIO  # noqa: PLC0415

    from botocore.response import StreamingBody  # noqa: PLC0415

    return StreamingBody(BytesIO(body), len(body))
