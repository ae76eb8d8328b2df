"""The SSM sessions simulator: the fleet it connects, faults, session limits, CloudTrail events, HTTP."""

# ruff: noqa: F811  (the tests name fixtures imported from ssm_sessions_support.py)
from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.ssm_sessions import CallerIdentity, SsmSessionsSimulator
from tests.sandbox.ssm_sessions_support import (
    ACCOUNT,
    CLOUDTRAIL_START_SESSION,
    OTHER_TARGET,
    REGION,
    START,
    TARGET,
    connected,
    error_of,
    iam_user_client,
    ssm,  # noqa: F401 (a fixture the tests name)
    ssm_clock,  # noqa: F401 (a fixture the tests name)
    ssm_sim,  # noqa: F401 (a fixture the tests name)
)


@pytest.fixture
def cloudtrail_events(
    ssm_sim: SsmSessionsSimulator,
    capture_events: Callable[[str, dict[str, Any]], Callable[[], list[dict[str, Any]]]],
) -> Callable[[], list[dict[str, Any]]]:
    """SessionGuard's EventBridge pattern into an SQS queue; call to drain the captured events."""
    return capture_events("start-session", CLOUDTRAIL_START_SESSION)


# -- scenario helpers and faults --------------------------------------------------------------------
def test_target_not_connected_when_the_fleet_does_not_have_it(
    iam_keys_env: None, ssm_clock: SandboxClock
) -> None:
    with mock_aws(), SsmSessionsSimulator(ssm_clock, connected_targets=lambda account, region: [TARGET]):
        client = boto3.client("ssm", region_name=REGION)
        assert client.start_session(Target=TARGET)["SessionId"]
        with pytest.raises(ClientError) as excinfo:
            client.start_session(Target=OTHER_TARGET)
        assert error_of(excinfo) == ("TargetNotConnected", f"{OTHER_TARGET} is not connected.")


def test_by_default_only_live_hyperpod_nodes_of_the_region_are_connected(
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Callable[..., dict[str, Any]],
) -> None:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    sagemaker.create_cluster(**hyperpod_cluster_request("ssm-cluster", workers=1))
    with SsmSessionsSimulator(hyperpod_clock, region=REGION, account_id=ACCOUNT) as simulator:
        ssm = boto3.client("ssm", region_name=REGION)
        cluster_id = sagemaker.describe_cluster(ClusterName="ssm-cluster")["ClusterArn"].rsplit("/", 1)[-1]

        def target_of(node: Mapping[str, Any]) -> str:
            return f"sagemaker-cluster:{cluster_id}_{node['InstanceGroupName']}-{node['InstanceId']}"

        def refused(target: str) -> bool:
            with pytest.raises(ClientError) as excinfo:
                ssm.start_session(Target=target)
            return error_of(excinfo) == ("TargetNotConnected", f"{target} is not connected.")

        [pending, *_] = sagemaker.list_cluster_nodes(ClusterName="ssm-cluster")["ClusterNodeSummaries"]
        assert refused(target_of(pending))  # still Pending: no agent yet
        hyperpod_clock.advance(3 * 3600)
        nodes = sagemaker.list_cluster_nodes(ClusterName="ssm-cluster")["ClusterNodeSummaries"]
        assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Running"}
        worker = next(n for n in nodes if n["InstanceGroupName"] == "worker-group-1")
        assert ssm.start_session(Target=target_of(worker))["SessionId"]
        assert refused(f"sagemaker-cluster:{cluster_id}_worker-group-1-i-0123456789abcdef0")  # no such node
        assert refused(f"sagemaker-cluster:000000000000_worker-group-1-{worker['InstanceId']}")
        assert refused(worker["InstanceId"])  # a HyperPod node is reached only through its cluster target
        # the same node is not a target in another region: that region has no such cluster
        with pytest.raises(ClientError) as elsewhere:
            boto3.client("ssm", region_name="us-west-2").start_session(Target=target_of(worker))
        assert error_of(elsewhere)[0] == "TargetNotConnected"
        assert simulator.sessions("Active")[0].target == target_of(worker)
        # a rebooting node is still billed, but its agent is not connected
        sagemaker.batch_reboot_cluster_nodes(ClusterName="ssm-cluster", NodeIds=[worker["InstanceId"]])
        assert refused(target_of(worker))


def test_injected_fault_fails_the_next_calls_only(ssm_sim: SsmSessionsSimulator) -> None:
    ssm = boto3.client(
        "ssm", region_name=REGION, config=Config(retries={"mode": "standard", "total_max_attempts": 1})
    )
    ssm_sim.inject_fault("TerminateSession", "ThrottlingException", "Rate exceeded", times=2)
    session_id = ssm.start_session(Target=TARGET)["SessionId"]

    for _ in range(2):
        with pytest.raises(ClientError) as excinfo:
            ssm.terminate_session(SessionId=session_id)
        assert error_of(excinfo) == ("ThrottlingException", "Rate exceeded")
    assert ssm.terminate_session(SessionId=session_id)["SessionId"] == session_id
    with pytest.raises(ValueError, match="operation must be one of"):
        ssm_sim.inject_fault("SendCommand", "X", "y")


def test_max_session_duration_ends_sessions_on_the_clock(iam_keys_env: None, ssm_clock: SandboxClock) -> None:
    with (
        mock_aws(),
        SsmSessionsSimulator(
            ssm_clock, connected_targets=connected, max_session_duration_minutes=60
        ) as simulator,
    ):
        client = boto3.client("ssm", region_name=REGION)
        session_id = client.start_session(Target=TARGET)["SessionId"]
        assert client.describe_sessions(State="Active")["Sessions"][0]["MaxSessionDuration"] == "60"
        ssm_clock.advance(3600)

        assert client.describe_sessions(State="Active")["Sessions"] == []
        [ended] = client.describe_sessions(State="History")["Sessions"]
        assert (ended["SessionId"], ended["Status"], ended["EndDate"]) == (
            session_id,
            "Terminated",
            START + timedelta(hours=1),
        )
        assert simulator.sessions("Active") == []


def test_start_session_as_a_run_as_user_is_visible_through_the_api(
    ssm: Any, ssm_sim: SsmSessionsSimulator
) -> None:
    iam = boto3.client("iam", region_name=REGION)
    iam.create_user(UserName="carol", Tags=[{"Key": "SSMSessionRunAs", "Value": "carol"}])
    carol = f"arn:aws:iam::{ACCOUNT}:user/carol"

    session_id = ssm_sim.start_session_as(carol, TARGET, reason="scenario")

    [session] = ssm.describe_sessions(State="Active", Filters=[{"key": "Owner", "value": carol}])["Sessions"]
    assert session["SessionId"] == session_id
    assert session_id.startswith("carol-")
    assert [s.session_id for s in ssm_sim.active_sessions_of(carol)] == [session_id]
    with pytest.raises(ValueError, match="not an IAM user"):
        ssm_sim.start_session_as("arn:aws:s3:::bucket", TARGET)


# -- the CloudTrail event -------------------------------------------------------------------------------
def test_start_session_emits_the_cloudtrail_event(
    ssm_sim: SsmSessionsSimulator,
    ssm_clock: SandboxClock,
    cloudtrail_events: Callable[[], list[dict[str, Any]]],
) -> None:
    alice, alice_arn = iam_user_client("alice")
    user_id = boto3.client("iam", region_name=REGION).get_user(UserName="alice")["User"]["UserId"]

    started = alice.start_session(Target=TARGET, DocumentName="AWS-StartPortForwardingSession")

    # CloudTrail delivers to EventBridge after the call returned, not during it
    ssm_sim.tick()
    assert cloudtrail_events() == []
    ssm_clock.advance(ssm_sim.cloudtrail_delay_seconds - 1)
    ssm_sim.tick()
    assert cloudtrail_events() == []
    ssm_clock.advance(1)
    ssm_sim.tick()
    [event] = cloudtrail_events()
    assert event["source"] == "aws.ssm"
    assert event["detail-type"] == "AWS API Call via CloudTrail"
    assert event["region"] == REGION
    assert event["account"] == ACCOUNT
    assert event["time"] == "2026-03-10T09:00:00Z"  # the sandbox clock's, not the wall clock's
    detail = event["detail"]
    assert detail["eventSource"] == "ssm.amazonaws.com"
    assert detail["eventName"] == "StartSession"
    assert detail["eventTime"] == "2026-03-10T09:00:00Z"
    assert detail["awsRegion"] == REGION
    assert detail["userIdentity"]["type"] == "IAMUser"
    assert detail["userIdentity"]["arn"] == alice_arn
    assert detail["userIdentity"]["principalId"] == user_id
    assert detail["userIdentity"]["userName"] == "alice"
    assert detail["userIdentity"]["accountId"] == ACCOUNT
    assert detail["requestParameters"] == {"target": TARGET, "documentName": "AWS-StartPortForwardingSession"}
    assert detail["responseElements"] == {
        "sessionId": started["SessionId"],
        "tokenValue": "Value hidden due to security reasons.",
        "streamUrl": started["StreamUrl"],
    }
    assert detail["readOnly"] is False
    assert detail["eventType"] == "AwsApiCall"
    assert detail["managementEvent"] is True
    assert detail["recipientAccountId"] == ACCOUNT
    assert detail["requestID"] != detail["eventID"]
    assert "botocore" in detail["userAgent"] or "Boto3" in detail["userAgent"]


def test_assumed_role_event_carries_the_session_issuer(
    ssm_sim: SsmSessionsSimulator,
    ssm_clock: SandboxClock,
    cloudtrail_events: Callable[[], list[dict[str, Any]]],
) -> None:
    role_arn = boto3.client("iam", region_name=REGION).create_role(
        RoleName="Researcher",
        AssumeRolePolicyDocument="{}",
        Tags=[{"Key": "SSMSessionRunAs", "Value": "dave"}],
    )["Role"]["Arn"]

    ssm_sim.start_session_as(role_arn, TARGET, role_session_name="dave")
    ssm_clock.advance(ssm_sim.cloudtrail_delay_seconds)
    ssm_sim.tick()

    [event] = cloudtrail_events()
    identity = event["detail"]["userIdentity"]
    assert identity["type"] == "AssumedRole"
    assert identity["arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/dave"
    assert identity["principalId"].endswith(":dave")
    assert identity["sessionContext"]["sessionIssuer"]["arn"] == role_arn
    assert identity["sessionContext"]["sessionIssuer"]["userName"] == "Researcher"
    assert event["detail"]["requestParameters"] == {"target": TARGET}


def test_caller_identity_parses_principals() -> None:
    with mock_aws():
        root = CallerIdentity.from_arn(f"arn:aws:iam::{ACCOUNT}:root")
        assert (root.type, root.principal_id, root.session_prefix) == ("Root", ACCOUNT, ACCOUNT)
        user = CallerIdentity.from_arn(f"arn:aws:iam::{ACCOUNT}:user/team/erin")
        assert (user.type, user.user_name) == ("IAMUser", "erin")
        assert user.principal_id.startswith("AIDA")
        assert len(user.principal_id) == 21
        sandbox_keys = CallerIdentity.from_arn(f"arn:aws:sts::{ACCOUNT}:user/moto")  # moto's default caller
        assert (sandbox_keys.type, sandbox_keys.arn) == ("Root", f"arn:aws:iam::{ACCOUNT}:root")


# -- over HTTP ---------------------------------------------------------------------------------------
def test_sessions_work_through_moto_server(
    iam_keys_env: None, ssm_clock: SandboxClock, moto_server: str
) -> None:
    simulator = SsmSessionsSimulator(
        ssm_clock, region=REGION, account_id=ACCOUNT, connected_targets=connected
    )
    simulator.install()
    try:
        client: Any = boto3.client("ssm", region_name=REGION, endpoint_url=moto_server)
        session_id = client.start_session(Target=TARGET)["SessionId"]
        [session] = client.describe_sessions(State="Active")["Sessions"]
        assert (session["SessionId"], session["StartDate"]) == (session_id, START)
        assert client.terminate_session(SessionId=session_id)["SessionId"] == session_id
        ssm_clock.advance(simulator.terminating_seconds)
        assert client.describe_sessions(State="History")["Sessions"][0]["Status"] == "Terminated"
        with pytest.raises(ClientError) as excinfo:
            client.describe_sessions(State="Nope")
        assert error_of(excinfo)[0] == "ValidationException"
    finally:
        simulator.uninstall()
