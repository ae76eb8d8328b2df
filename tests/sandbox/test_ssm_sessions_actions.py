"""The SSM sessions simulator's seam and actions through plain boto3 clients (botocore validation on)."""

# ruff: noqa: F811  (the tests name fixtures imported from ssm_sessions_support.py)
from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ParamValidationError
from moto import mock_aws
from moto.core.utils import camelcase_to_underscores, method_names_from_class
from moto.ssm.responses import SimpleSystemManagerResponse

from sandbox.emulator.clock import SandboxClock
from sandbox.services.ssm_sessions import DEFAULT_DOCUMENT, OPERATIONS, SessionsError, SsmSessionsSimulator
from sandbox.services.ssm_sessions import simulator_for as ssm_simulator_for
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


def capture_queue_in(region: str, name: str) -> tuple[str, Callable[[], list[dict[str, Any]]]]:
    """An SQS queue in ``region`` to capture events in: (its ARN, drain)."""
    sqs = boto3.client("sqs", region_name=region)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def drain() -> list[dict[str, Any]]:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        return [json.loads(message["Body"]) for message in messages]

    return arn, drain


# -- the seam --------------------------------------------------------------------------------------
def test_seam_moto_still_lacks_sessions_and_dispatches_by_method_name(iam_keys_env: None) -> None:
    """Fails when a moto upgrade implements sessions itself or stops dispatching by method name."""
    native = method_names_from_class(SimpleSystemManagerResponse)
    wanted = [camelcase_to_underscores(op) for op in OPERATIONS]
    assert not set(wanted) & set(native), "moto implements SSM sessions now: drop or rework the seam"

    with mock_aws():
        client = boto3.client("ssm", region_name=REGION)
        with pytest.raises(NotImplementedError):
            client.describe_sessions(State="Active")
        simulator = SsmSessionsSimulator(
            SandboxClock(speed=0, start=START), region=REGION, account_id=ACCOUNT, connected_targets=connected
        )
        with simulator:
            assert set(wanted) <= set(method_names_from_class(SimpleSystemManagerResponse))
            session_id = client.start_session(Target=TARGET)["SessionId"]
            assert [s["SessionId"] for s in client.describe_sessions(State="Active")["Sessions"]] == [
                session_id
            ]
        assert not set(wanted) & set(method_names_from_class(SimpleSystemManagerResponse))
        with pytest.raises(NotImplementedError):
            client.describe_sessions(State="Active")


def test_every_region_is_served_by_its_own_simulator(
    ssm_sim: SsmSessionsSimulator, ssm_clock: SandboxClock
) -> None:
    home = boto3.client("ssm", region_name=REGION)
    oregon = boto3.client("ssm", region_name="us-west-2")
    assert oregon.describe_sessions(State="Active")["Sessions"] == []  # served, not an error

    started = oregon.start_session(Target=TARGET)
    assert started["StreamUrl"].startswith("wss://ssmmessages.us-west-2.amazonaws.com/")
    assert [s["SessionId"] for s in oregon.describe_sessions(State="Active")["Sessions"]] == [
        started["SessionId"]
    ]
    assert home.describe_sessions(State="Active")["Sessions"] == []  # sessions are regional
    spawned = ssm_simulator_for(ACCOUNT, "us-west-2")
    assert spawned is not None
    assert spawned.clock is ssm_clock  # one clock for the whole sandbox

    # its CloudTrail event goes to us-west-2's bus, delivered when the installed simulator ticks
    oregon_events = boto3.client("events", region_name="us-west-2")
    oregon_events.put_rule(Name="start-session", EventPattern=json.dumps(CLOUDTRAIL_START_SESSION))
    queue_arn, drain = capture_queue_in("us-west-2", "oregon-start-session")
    oregon_events.put_targets(Rule="start-session", Targets=[{"Id": "q", "Arn": queue_arn}])
    ssm_clock.advance(ssm_sim.cloudtrail_delay_seconds)
    ssm_sim.tick()
    [event] = drain()
    assert (event["region"], event["detail"]["awsRegion"]) == ("us-west-2", "us-west-2")

    ssm_sim.uninstall()  # the regions spawned from it go with it
    assert ssm_simulator_for(ACCOUNT, "us-west-2") is None
    ssm_sim.install()


# -- StartSession / DescribeSessions / TerminateSession ---------------------------------------------
def test_start_session_returns_id_token_and_stream_url(ssm: Any) -> None:
    started = ssm.start_session(Target=TARGET, Reason="debug NCCL hang")

    assert started["SessionId"].startswith(f"{ACCOUNT}-")
    assert started["TokenValue"]
    assert started["StreamUrl"] == (
        f"wss://ssmmessages.{REGION}.amazonaws.com/v1/data-channel/{started['SessionId']}?role=publish_subscribe"
    )
    [session] = ssm.describe_sessions(State="Active")["Sessions"]
    assert session["SessionId"] == started["SessionId"]
    assert session["Target"] == TARGET
    assert session["Status"] == "Connected"
    assert session["StartDate"] == START
    assert session["DocumentName"] == DEFAULT_DOCUMENT
    assert session["Owner"] == f"arn:aws:iam::{ACCOUNT}:root"  # the sandbox's keys: the account root
    assert session["Reason"] == "debug NCCL hang"
    assert session["AccessType"] == "Standard"
    assert "EndDate" not in session
    assert ssm.describe_sessions(State="History")["Sessions"] == []


def test_owner_is_the_calling_iam_user(ssm_sim: SsmSessionsSimulator) -> None:
    alice, alice_arn = iam_user_client("alice")

    session_id = alice.start_session(Target=TARGET)["SessionId"]

    assert session_id.startswith("alice-")
    [session] = alice.describe_sessions(State="Active")["Sessions"]
    assert session["Owner"] == alice_arn == f"arn:aws:iam::{ACCOUNT}:user/alice"


def test_owner_is_the_assumed_role_session(ssm_sim: SsmSessionsSimulator) -> None:
    iam = boto3.client("iam", region_name=REGION)
    role_arn = iam.create_role(RoleName="Researcher", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    creds = boto3.client("sts", region_name=REGION).assume_role(RoleArn=role_arn, RoleSessionName="bob")[
        "Credentials"
    ]
    client = boto3.client(
        "ssm",
        region_name=REGION,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )

    session_id = client.start_session(Target=TARGET)["SessionId"]

    assert session_id.startswith("bob-")
    [session] = client.describe_sessions(State="Active")["Sessions"]
    assert session["Owner"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/bob"


def test_terminate_passes_through_terminating_to_history(
    ssm: Any, ssm_sim: SsmSessionsSimulator, ssm_clock: SandboxClock
) -> None:
    keep = ssm.start_session(Target=TARGET)["SessionId"]
    end = ssm.start_session(Target=OTHER_TARGET)["SessionId"]
    ssm_clock.advance(300)

    assert ssm.terminate_session(SessionId=end)["SessionId"] == end

    statuses = {s["SessionId"]: s["Status"] for s in ssm.describe_sessions(State="Active")["Sessions"]}
    assert statuses == {keep: "Connected", end: "Terminating"}  # still Active while it terminates
    assert ssm.describe_sessions(State="History")["Sessions"] == []
    assert ssm.terminate_session(SessionId=end)["SessionId"] == end  # again: still Terminating
    ssm_clock.advance(ssm_sim.terminating_seconds)

    assert [s["SessionId"] for s in ssm.describe_sessions(State="Active")["Sessions"]] == [keep]
    [ended] = ssm.describe_sessions(State="History")["Sessions"]
    assert ended["SessionId"] == end
    assert ended["Status"] == "Terminated"
    assert ended["EndDate"] == START + timedelta(seconds=300 + ssm_sim.terminating_seconds)


def test_terminate_is_idempotent_and_accepts_unknown_ids(
    ssm: Any, ssm_sim: SsmSessionsSimulator, ssm_clock: SandboxClock
) -> None:
    session_id = ssm.start_session(Target=TARGET)["SessionId"]
    ssm.terminate_session(SessionId=session_id)
    ssm_clock.advance(ssm_sim.terminating_seconds)

    assert ssm.terminate_session(SessionId=session_id)["SessionId"] == session_id
    assert (
        ssm.terminate_session(SessionId="nobody-0123456789abcdef0")["SessionId"] == "nobody-0123456789abcdef0"
    )
    assert len(ssm.describe_sessions(State="History")["Sessions"]) == 1


def test_disconnected_stays_active_and_failed_goes_to_history(
    ssm: Any, ssm_sim: SsmSessionsSimulator
) -> None:
    dropped = ssm.start_session(Target=TARGET)["SessionId"]
    broken = ssm.start_session(Target=OTHER_TARGET)["SessionId"]

    ssm_sim.disconnect(dropped)
    ssm_sim.fail(broken)

    [active] = ssm.describe_sessions(State="Active")["Sessions"]
    assert (active["SessionId"], active["Status"]) == (dropped, "Disconnected")
    [history] = ssm.describe_sessions(State="History")["Sessions"]
    assert (history["SessionId"], history["Status"]) == (broken, "Failed")


# -- filters and paging ---------------------------------------------------------------------------
def test_filters_select_by_owner_target_status_id_and_time(
    ssm_sim: SsmSessionsSimulator, ssm_clock: SandboxClock
) -> None:
    alice, alice_arn = iam_user_client("alice")
    bob, bob_arn = iam_user_client("bob")
    first = alice.start_session(Target=TARGET)["SessionId"]
    ssm_clock.advance(3600)
    second = alice.start_session(Target=OTHER_TARGET)["SessionId"]
    third = bob.start_session(Target=TARGET)["SessionId"]

    def ids(*filters: tuple[str, str]) -> list[str]:
        response = alice.describe_sessions(
            State="Active", Filters=[{"key": k, "value": v} for k, v in filters]
        )
        return [s["SessionId"] for s in response["Sessions"]]

    assert ids(("Owner", alice_arn)) == [second, first]  # newest first
    assert ids(("Owner", bob_arn)) == [third]
    assert ids(("Target", TARGET)) == [third, first]
    assert ids(("Owner", alice_arn), ("Target", TARGET)) == [first]
    assert ids(("SessionId", second)) == [second]
    assert ids(("Status", "Connected"), ("AccessType", "Standard")) == [third, second, first]
    assert ids(("Status", "Disconnected")) == []
    cut = (START + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids(("InvokedAfter", cut)) == [third, second]
    assert ids(("InvokedBefore", cut)) == [first]


def test_pages_with_max_results_and_next_token(ssm: Any, ssm_clock: SandboxClock) -> None:
    started = []
    for _ in range(5):
        started.append(ssm.start_session(Target=TARGET)["SessionId"])
        ssm_clock.advance(1)

    seen: list[str] = []
    kwargs: dict[str, Any] = {"State": "Active", "MaxResults": 2}
    pages = 0
    while True:
        page = ssm.describe_sessions(**kwargs)
        pages += 1
        seen += [s["SessionId"] for s in page["Sessions"]]
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]

    assert pages == 3
    assert seen == list(reversed(started))


def test_bad_next_token_is_invalid_next_token(ssm: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Active", NextToken="not-a-token")
    assert error_of(excinfo)[0] == "InvalidNextToken"


# -- validation as AWS answers it ---------------------------------------------------------------------
def test_bad_state_is_a_validation_exception(ssm: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Running")
    code, message = error_of(excinfo)
    assert code == "ValidationException"
    assert message == (
        "1 validation error detected: Value 'Running' at 'state' failed to satisfy constraint: "
        "Member must satisfy enum value set: [Active, History]"
    )
    assert excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_more_than_six_filters_is_rejected(ssm: Any) -> None:
    filters = [{"key": "Target", "value": f"i-{n:017x}"} for n in range(7)]
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Active", Filters=filters)
    code, message = error_of(excinfo)
    assert code == "ValidationException"
    assert message.startswith("1 validation error detected: Value '[SessionFilter(key=Target")
    assert message.endswith(
        "at 'filters' failed to satisfy constraint: Member must have length less than or equal to 6"
    )


def test_unknown_filter_key_is_rejected(ssm: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Active", Filters=[{"key": "InstanceId", "value": "i-0123"}])
    code, message = error_of(excinfo)
    assert code == "ValidationException"
    assert "Value 'InstanceId' at 'filters.1.member.key' failed to satisfy constraint" in message
    assert "[InvokedAfter, InvokedBefore, Target, Owner, Status, SessionId, AccessType]" in message


def test_max_results_range(ssm: Any, ssm_sim: SsmSessionsSimulator) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Active", MaxResults=201)
    assert error_of(excinfo) == (
        "ValidationException",
        "1 validation error detected: Value '201' at 'maxResults' failed to satisfy constraint: "
        "Member must have value less than or equal to 200",
    )
    with pytest.raises(ParamValidationError):  # botocore checks the minimum client-side
        ssm.describe_sessions(State="Active", MaxResults=0)
    with pytest.raises(SessionsError, match="greater than or equal to 1"):  # and the server does too
        ssm_sim.describe_sessions("Active", max_results=0)
    assert ssm.describe_sessions(State="Active", MaxResults=200)["Sessions"] == []


def test_errors_are_collected_like_aws(ssm: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.describe_sessions(State="Bogus", MaxResults=500)
    assert error_of(excinfo)[1].startswith("2 validation errors detected: Value 'Bogus' at 'state'")


def test_bad_filter_values_are_rejected(ssm: Any) -> None:
    for key, value in [("InvokedAfter", "yesterday"), ("Status", "Running"), ("AccessType", "Root")]:
        with pytest.raises(ClientError) as excinfo:
            ssm.describe_sessions(State="Active", Filters=[{"key": key, "value": value}])
        assert error_of(excinfo)[0] == "ValidationException", key


def test_unknown_document_is_invalid_document_and_account_documents_work(ssm: Any) -> None:
    with pytest.raises(ClientError) as excinfo:
        ssm.start_session(Target=TARGET, DocumentName="No-Such-Document")
    assert error_of(excinfo)[0] == "InvalidDocument"

    ssm.create_document(
        Name="HyperPod-RunAsShell",
        DocumentType="Session",
        Content=json.dumps(
            {"schemaVersion": "1.0", "description": "shell", "sessionType": "Standard_Stream", "inputs": {}}
        ),
    )
    assert ssm.start_session(Target=TARGET, DocumentName="HyperPod-RunAsShell")["SessionId"]
    assert ssm.start_session(
        Target=TARGET, DocumentName="AWS-StartSSHSession", Parameters={"portNumber": ["22"]}
    )
