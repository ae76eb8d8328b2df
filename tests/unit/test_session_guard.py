"""SessionGuard's use cases on moto with the SSM sessions simulator: limits kept oldest-first, Run-As
refusals with an alert (the role's tag or a session tag), one record and one event per termination
whatever the number of deliveries, only HyperPod targets of registered clusters touched; the handler."""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from autopilot.dal.session_terminations import SessionTerminations
from autopilot.dal.state_table import StateTable
from autopilot.logic import session_guard
from autopilot.logic.session_guard import (
    ALREADY_RECORDED,
    ENDING,
    KEPT,
    NOT_HYPERPOD,
    NOT_STARTED,
    SESSION_TAG_RECORDED,
    TERMINATED,
    UNREGISTERED_CLUSTER,
    SessionGuard,
)
from autopilot.models.records import Cluster, ClusterStatus, Operation, OperationStatus, OperationType
from autopilot.models.sessions import (
    AssumeRoleCall,
    AssumeRoleEvent,
    SessionTermination,
    StartSessionCall,
    TerminationReason,
)
from autopilot.settings import SessionGuardSettings
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.deploy import load_template
from sandbox.services.ssm_sessions import SsmSessionsSimulator
from tests.samples import load_event
from tests.samples.state_table import create_state_table
from tests.unit.session_guard_support import (
    ACCOUNT,
    CLUSTER_ID,
    EC2_INSTANCE,
    NODES,
    START,
    start_session_call,
    user_arn,
)

REGION = "us-east-1"
TABLE = "state"
CLUSTER_ARN = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/{CLUSTER_ID}"
UNREGISTERED_NODE = "sagemaker-cluster:zzzz9999yyyy_worker-group-1-i-0aaaaaaaaaaaaaaaa"
TEMPLATE = load_template(Path(__file__).resolve().parents[2] / "template.yaml")


# -- the use cases on moto ------------------------------------------------------------------------
@dataclass
class World:
    sim: SsmSessionsSimulator
    clock: SandboxClock
    guard: SessionGuard
    records: SessionTerminations
    alerts_queue: str
    events_queue: str
    terminate_calls: list[str] = field(default_factory=list)

    def user(self, name: str, tags: dict[str, str] | None = None) -> str:
        iam = boto3.client("iam", region_name=REGION)
        iam.create_user(UserName=name, Tags=[{"Key": k, "Value": v} for k, v in (tags or {}).items()])
        return user_arn(name)

    def start(self, owner: str, target: str = NODES[0], *, minutes_later: float = 1) -> str:
        session_id = self.sim.start_session_as(owner, target)
        self.clock.advance(minutes_later * 60)
        return session_id

    def call_for(self, session_id: str) -> StartSessionCall:
        """The CloudTrail record the simulator queued for this session (as the rule would deliver it)."""
        session = next(s for s in self.sim.sessions() if s.session_id == session_id)
        return start_session_call(
            userIdentity={"type": "IAMUser", "arn": session.owner},
            requestParameters={"target": session.target},
            responseElements={"sessionId": session_id},
        )

    def active_ids(self, owner: str) -> list[str]:
        return [s.session_id for s in self.sim.active_sessions_of(owner) if s.status != "Terminating"]

    @staticmethod
    def drain(queue_url: str) -> list[str]:
        sqs = boto3.client("sqs", region_name=REGION)
        found: list[str] = []
        while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
            found += [m["Body"] for m in messages]
            for m in messages:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return found

    def alerts(self) -> list[str]:
        """The alert texts published to the alerts topic (raw delivery to a queue)."""
        return self.drain(self.alerts_queue)

    def events(self) -> list[dict[str, Any]]:
        """The Autopilot events put on the default bus."""
        return [json.loads(body) for body in self.drain(self.events_queue)]


def _queue(name: str) -> tuple[str, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _register_cluster(store: StateTable, name: str, arn: str) -> None:
    at = "2026-03-10T08:00:00.000Z"
    store.start_create(
        Cluster(
            cluster_name=name,
            status=ClusterStatus.ACTIVE,
            created_at=at,
            updated_at=at,
            last_operation_id="op-1",
            cluster_arn=arn,
        ),
        Operation(
            operation_id=f"op-{name}",
            operation_type=OperationType.CREATE_CLUSTER,
            cluster_name=name,
            status=OperationStatus.SUCCEEDED,
            created_at=at,
            updated_at=at,
        ),
    )


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    clock = SandboxClock(speed=0, start=START)
    connected = [*NODES, UNREGISTERED_NODE, EC2_INSTANCE]
    with (
        mock_aws(),
        SsmSessionsSimulator(clock, REGION, ACCOUNT, connected_targets=lambda *_: connected) as sim,
    ):
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_state_table(ddb, TABLE)
        _register_cluster(StateTable(TABLE, client=ddb), "research", CLUSTER_ARN)

        sns = boto3.client("sns", region_name=REGION)
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        alerts_url, alerts_arn = _queue("alerts")
        sns.subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=alerts_arn, Attributes={"RawMessageDelivery": "true"}
        )
        events = boto3.client("events", region_name=REGION)
        events_url, events_arn = _queue("autopilot-events")
        events.put_rule(Name="autopilot", EventPattern=json.dumps({"source": ["hyperpod.autopilot"]}))
        events.put_targets(Rule="autopilot", Targets=[{"Id": "q", "Arn": events_arn}])

        ssm = boto3.client("ssm", region_name=REGION, config=Config(retries={"total_max_attempts": 1}))
        calls: list[str] = []
        ssm.meta.events.register(
            "provide-client-params.ssm.TerminateSession",
            lambda params, **_: calls.append(params["SessionId"]),
        )
        settings = SessionGuardSettings.model_validate(
            {
                "STATE_TABLE_NAME": TABLE,
                "ALERTS_TOPIC_ARN": topic,
                "MAX_SESSIONS_PER_USER": TEMPLATE["Parameters"]["MaxSessionsPerUser"]["Default"],
                "FORBIDDEN_RUN_AS_USERS": TEMPLATE["Parameters"]["ForbiddenRunAsUsers"]["Default"],
            }
        )
        records = SessionTerminations(TABLE, ddb)
        guard = SessionGuard(
            settings,
            registry=StateTable(TABLE, client=ddb),
            terminations=records,
            ssm=ssm,
            iam=boto3.client("iam", region_name=REGION),
            sns=sns,
            events=events,
            now=clock.now,
        )
        yield World(sim, clock, guard, records, alerts_url, events_url, calls)


def test_four_sessions_and_a_limit_of_two_keep_the_two_oldest(world: World) -> None:
    alice = world.user("alice", {"SSMSessionRunAs": "alice"})
    s1, s2, s3, s4 = (world.start(alice, node) for node in NODES)

    outcomes = world.guard.on_start_session(world.call_for(s4))

    assert outcomes == {TERMINATED: 2, KEPT: 2, ENDING: 0}
    assert world.terminate_calls == [s4, s3]  # newest first
    assert world.active_ids(alice) == [s1, s2]
    records = {r.session_id: r for r in world.records.list_for_cluster("research")}
    assert set(records) == {s3, s4}
    assert records[s4].reason is TerminationReason.OVER_LIMIT
    assert (records[s4].principal, records[s4].target, records[s4].limit) == (alice, NODES[3], 2)
    assert (records[s4].trigger, records[s4].run_as) == ("event", "alice")
    assert records[s4].terminated_at is not None
    events = world.events()
    assert sorted(e["detail"]["sessionId"] for e in events) == sorted([s3, s4])
    assert {e["detail-type"] for e in events} == {"Session Terminated"}
    assert events[0]["detail"]["reason"] == "over-limit"
    assert events[0]["detail"]["clusterName"] == "research"
    assert world.alerts() == []  # a limit is routine: the event tells, no alert


def test_a_duplicated_event_terminates_nothing_twice_and_records_once(world: World) -> None:
    alice = world.user("alice", {"SSMSessionRunAs": "alice"})
    sessions = [world.start(alice, node) for node in NODES[:3]]
    call = world.call_for(sessions[-1])

    world.guard.on_start_session(call)
    again = world.guard.on_start_session(call)
    world.clock.advance(600)  # the termination finished: the session is History now
    once_more = world.guard.on_start_session(call)

    assert world.terminate_calls == [sessions[-1]]
    assert again == {KEPT: 2, ENDING: 1}
    assert once_more == {KEPT: 2, ENDING: 0}
    assert [r.session_id for r in world.records.list_for_cluster("research")] == [sessions[-1]]
    assert len(world.events()) == 1


def test_a_session_claimed_by_another_delivery_is_left_to_it(world: World) -> None:
    alice = world.user("alice", {"SSMSessionRunAs": "alice"})
    sessions = [world.start(alice, node) for node in NODES[:3]]
    # Another invocation claimed the newest a moment ago and has not terminated it yet.
    claim = SessionTermination(
        cluster_name="research",
        session_id=sessions[-1],
        target=NODES[2],
        principal=alice,
        reason=TerminationReason.OVER_LIMIT,
        trigger="event",
        session_started_at="2026-03-10T09:02:00.000Z",
        claimed_at=world.clock.now(),
    )
    assert world.records.claim(claim, stale_before=world.clock.now() - timedelta(minutes=5))

    assert world.guard.on_start_session(world.call_for(sessions[-1]))[ALREADY_RECORDED] == 1
    assert world.terminate_calls == []

    # That invocation died: once its claim is older than the lease, the schedule takes over.
    world.clock.advance(6 * 60)
    assert world.guard.sweep()[TERMINATED] == 1
    assert world.terminate_calls == [sessions[-1]]
    [record] = world.records.list_for_cluster("research")
    assert (record.trigger, record.terminated_at is not None) == ("schedule", True)


def test_a_principal_without_run_as_is_refused_with_an_alert(world: World) -> None:
    mallory = world.user("mallory")
    session = world.start(mallory)

    outcomes = world.guard.on_start_session(world.call_for(session))

    assert outcomes[TERMINATED] == 1
    assert world.active_ids(mallory) == []
    [record] = world.records.list_for_cluster("research")
    assert (record.reason, record.run_as, record.limit) == (TerminationReason.RUN_AS_MISSING, None, None)
    [alert] = world.alerts()
    assert "mallory has no SSMSessionRunAs tag" in alert
    assert f"session: {session} (terminated)" in alert
    assert f"target: {NODES[0]}" in alert
    assert "cluster: research" in alert
    [event] = world.events()
    assert event["detail"] == {
        "clusterName": "research",
        "sessionId": session,
        "target": NODES[0],
        "principal": mallory,
        "reason": "run-as-missing",
        "trigger": "event",
    }


def test_a_principal_mapped_to_root_is_refused_with_an_alert(world: World) -> None:
    eve = world.user("eve", {"SSMSessionRunAs": "root"})
    session = world.start(eve)

    world.guard.on_start_session(world.call_for(session))

    [record] = world.records.list_for_cluster("research")
    assert (record.reason, record.run_as) == (TerminationReason.RUN_AS_FORBIDDEN, "root")
    [event] = world.events()
    assert (event["detail"]["reason"], event["detail"]["runAs"]) == ("run-as-forbidden", "root")


def _role(name: str, tags: dict[str, str], path: str = "/") -> str:
    iam = boto3.client("iam", region_name=REGION)
    return str(
        iam.create_role(
            RoleName=name,
            Path=path,
            AssumeRolePolicyDocument="{}",
            Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )["Role"]["Arn"]
    )


def test_the_max_sessions_tag_on_a_role_limits_all_its_plain_sessions_together(world: World) -> None:
    role = _role("Researcher", {"SSMSessionRunAs": "research", "autopilot:max-sessions": "1"})
    dave = [world.sim.start_session_as(role, node, role_session_name="dave") for node in NODES[:2]]
    erin = world.sim.start_session_as(role, NODES[2], role_session_name="erin")

    outcomes = world.guard.sweep()

    # an AssumeRole caller names its own session: "dave" and "erin" are the role, one person
    assert outcomes == {TERMINATED: 2, KEPT: 1, ENDING: 0}
    # the three started at the same instant; the order of their ids decides, the same way every run
    oldest = min([*dave, erin])
    assert sorted(world.terminate_calls) == sorted({*dave, erin} - {oldest})
    assert {r.limit for r in world.records.list_for_cluster("research")} == {1}


def test_one_role_with_a_new_session_name_per_session_is_one_person(world: World) -> None:
    # issue 20: the limit was per session ARN, so a session name per session evaded it
    role = _role("Shared", {"SSMSessionRunAs": "research"})
    arns = [f"arn:aws:sts::{ACCOUNT}:assumed-role/Shared/s{n}" for n in range(3)]
    ids = []
    for n, node in enumerate(NODES[:3]):
        ids.append(world.sim.start_session_as(role, node, role_session_name=f"s{n}"))
        world.clock.advance(60)

    outcomes = world.guard.on_start_session(world.call_for(ids[-1]))

    assert outcomes == {TERMINATED: 1, KEPT: 2, ENDING: 0}
    assert world.terminate_calls == [ids[-1]]
    [record] = world.records.list_for_cluster("research")
    assert record.principal == arns[-1]  # the session's own owner, as DescribeSessions names it


def test_identity_center_users_of_one_permission_set_are_counted_each_on_their_own(world: World) -> None:
    role = _role(
        "AWSReservedSSO_Researcher_0123456789abcdef",
        {"SSMSessionRunAs": "research"},
        path="/aws-reserved/sso.amazonaws.com/",
    )
    for user in ("ann", "bob"):
        for node in NODES[:2]:
            world.sim.start_session_as(role, node, role_session_name=user)
            world.clock.advance(60)

    assert world.guard.sweep() == {KEPT: 4, ENDING: 0}  # two each: each within MaxSessionsPerUser

    third = world.sim.start_session_as(role, NODES[2], role_session_name="ann")
    world.clock.advance(60)
    assert world.guard.on_start_session(world.call_for(third)) == {TERMINATED: 1, KEPT: 2, ENDING: 0}
    assert world.terminate_calls == [third]


def test_non_hyperpod_and_unregistered_targets_are_never_touched(world: World) -> None:
    mallory = world.user("mallory")  # would be refused on a registered cluster
    on_ec2 = world.start(mallory, EC2_INSTANCE)
    elsewhere = world.start(mallory, UNREGISTERED_NODE)

    assert world.guard.on_start_session(world.call_for(on_ec2)) == {NOT_HYPERPOD: 1}
    assert world.guard.on_start_session(world.call_for(elsewhere)) == {UNREGISTERED_CLUSTER: 1}
    assert world.guard.sweep() == {NOT_HYPERPOD: 1, UNREGISTERED_CLUSTER: 1}
    assert world.terminate_calls == []
    assert world.active_ids(mallory) == [on_ec2, elsewhere]


def test_a_failed_start_session_is_nothing_to_check(world: World) -> None:
    call = start_session_call(errorCode="TargetNotConnected", responseElements=None)
    assert world.guard.on_start_session(call) == {NOT_STARTED: 1}


def test_the_schedule_catches_every_principal_over_every_page(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_guard, "_PAGE_SIZE", 2)  # five sessions: three DescribeSessions pages
    alice = world.user("alice", {"SSMSessionRunAs": "alice"})
    mallory = world.user("mallory")
    kept = [world.start(alice, node) for node in NODES[:2]]
    newest = world.start(alice, NODES[2])
    refused = [world.start(mallory, node) for node in NODES[:2]]

    outcomes = world.guard.sweep()

    assert outcomes == {TERMINATED: 3, KEPT: 2, ENDING: 0}
    assert world.active_ids(alice) == kept
    assert world.active_ids(mallory) == []
    reasons = {r.session_id: r.reason for r in world.records.list_for_cluster("research")}
    assert reasons == {
        newest: TerminationReason.OVER_LIMIT,
        refused[0]: TerminationReason.RUN_AS_MISSING,
        refused[1]: TerminationReason.RUN_AS_MISSING,
    }
    assert {r.trigger for r in world.records.list_for_cluster("research")} == {"schedule"}
    assert len(world.alerts()) == 2


def test_a_failed_termination_leaves_no_record_and_the_next_run_retries(world: World) -> None:
    mallory = world.user("mallory")
    session = world.start(mallory)
    world.sim.inject_fault("TerminateSession", "InternalServerError", "try again")

    with pytest.raises(ClientError):
        world.guard.on_start_session(world.call_for(session))

    assert world.records.list_for_cluster("research") == []
    assert world.alerts() == []
    assert world.guard.sweep()[TERMINATED] == 1
    assert world.active_ids(mallory) == []
    assert len(world.alerts()) == 1


def test_a_principal_whose_role_is_gone_is_refused(world: World) -> None:
    # The role was deleted after its session started: nothing maps the session to a user any more.
    ghost = f"arn:aws:sts::{ACCOUNT}:assumed-role/Departed/frank"
    session = world.sim.start_session_as(ghost, NODES[0])

    assert world.guard.sweep()[TERMINATED] == 1

    [record] = world.records.list_for_cluster("research")
    assert (record.session_id, record.reason) == (session, TerminationReason.RUN_AS_MISSING)
    [alert] = world.alerts()
    assert ghost in alert


# -- SSMSessionRunAs as a session tag ---------------------------------------------------------------
def assume_role_call(**changes: Any) -> AssumeRoleCall:
    """CloudTrail's record of an AssumeRole call that passed SSMSessionRunAs=root (events/ssm), changed."""
    detail = copy.deepcopy(load_event("ssm/assume_role_run_as_tag.json")["detail"])
    detail.update(changes)
    return AssumeRoleEvent.model_validate(
        {**load_event("ssm/assume_role_run_as_tag.json"), "detail": detail}
    ).detail


def test_a_run_as_session_tag_overrides_the_roles_own_and_is_judged(world: World) -> None:
    # issue 20: Session Manager honours an SSMSessionRunAs session tag; the guard read only the role's
    role = _role("Researcher", {"SSMSessionRunAs": "research"})
    assert world.guard.on_assume_role(assume_role_call()) == {SESSION_TAG_RECORDED: 1}
    dave = world.sim.start_session_as(role, NODES[0], role_session_name="dave")
    erin = world.sim.start_session_as(role, NODES[1], role_session_name="erin")
    world.clock.advance(60)

    outcomes = world.guard.on_start_session(world.call_for(dave))

    assert outcomes == {TERMINATED: 1, KEPT: 1, ENDING: 0}
    assert world.terminate_calls == [dave]  # erin's session runs as the role's "research"
    assert erin in [s.session_id for s in world.sim.sessions("Active")]
    [record] = world.records.list_for_cluster("research")
    assert (record.reason, record.run_as) == (TerminationReason.RUN_AS_FORBIDDEN, "root")
    assert "mapped (SSMSessionRunAs) to the user 'root'" in world.alerts()[0]


def test_an_identity_providers_run_as_tag_maps_a_role_without_one(world: World) -> None:
    role = _role("Federated", {})
    saml = assume_role_call(
        eventName="AssumeRoleWithSAML",
        requestParameters={"roleSessionName": "ann", "principalTags": {"SSMSessionRunAs": "ann"}},
        responseElements={
            "credentials": {"expiration": "Mar 10, 2026, 10:00:00 AM"},
            "assumedRoleUser": {"arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/Federated/ann"},
        },
    )
    world.guard.on_assume_role(saml)
    ann = world.sim.start_session_as(role, NODES[0], role_session_name="ann")
    world.clock.advance(60)

    assert world.guard.on_start_session(world.call_for(ann)) == {KEPT: 1, ENDING: 0}

    world.clock.advance(3600)  # past 10:00: the credentials, and so the tag, have expired
    assert world.guard.sweep()[TERMINATED] == 1
    [record] = world.records.list_for_cluster("research")
    assert record.reason is TerminationReason.RUN_AS_MISSING


def test_a_call_without_the_tag_or_that_failed_records_nothing(world: World) -> None:
    untagged = assume_role_call(
        requestParameters={"roleSessionName": "dave", "tags": [{"key": "team", "value": "x"}]}
    )
    refused = assume_role_call(errorCode="AccessDenied", responseElements=None)

    assert world.guard.on_assume_role(untagged) == world.guard.on_assume_role(refused) == {}


def test_the_handler_hands_an_assume_role_record_to_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location(
        "session_guard_app", Path(__file__).resolve().parents[2] / "functions" / "session_guard" / "app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    calls: list[AssumeRoleCall] = []
    monkeypatch.setattr(app, "deps", lambda: SimpleNamespace(on_assume_role=lambda c: calls.append(c) or {}))
    context = SimpleNamespace(
        function_name="SessionGuardFunction",
        memory_limit_in_mb=256,
        invoked_function_arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:SessionGuardFunction",
        aws_request_id="00000000-0000-4000-8000-000000000000",
    )

    app.lambda_handler(load_event("ssm/assume_role_run_as_tag.json"), context)

    [call] = calls
    assert call.run_as == (
        f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/dave",
        "root",
        "Mar 10, 2026, 9:59:00 AM",
    )
