"""SessionGuard end to end in the sandbox, driven only by simulated AWS activity.

Researchers are IAM users (with and without an ``SSMSessionRunAs`` tag) who start SSM sessions on the
nodes of a cluster created through the API, with boto3 and their own keys; the sandbox's Session
Manager puts CloudTrail's StartSession record on the bus 30 simulated seconds later, as a trail would,
and the deployed template does the rest. What the test observes is what an operator would: the
sessions left (DescribeSessions), the alerts topic, the notifications topic and the state table.

The clock is frozen and stepped by hand, so the event and the schedule (every 5 simulated minutes) are
told apart: sessions start just after a scheduled run, and their events arrive long before the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from autopilot.dal.session_terminations import SessionTerminations
from autopilot.models.sessions import SessionTermination, TerminationReason

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.emulator import bus
from sandbox.harness.core import Sandbox
from tests.e2e.waiting import wait_for

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
CLUSTER = "e2e-sessions"
SCHEDULE = "SessionGuardFunctionSessionGuardSchedule"
START_SESSION = {
    "source": ["aws.ssm"],
    "detail-type": ["AWS API Call via CloudTrail"],
    "detail": {"eventSource": ["ssm.amazonaws.com"], "eventName": ["StartSession"]},
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=DEMO_PARAMETERS, speed=0) as running:
        yield running


def _queue(sandbox: Sandbox, name: str) -> tuple[str, str]:
    sqs = sandbox.client("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


@dataclass
class Site:
    """The running cluster, its node targets, and what an operator watches."""

    sandbox: Sandbox
    targets: list[str]
    alerts_queue: str
    notifications_queue: str
    cloudtrail_queue: str

    def researcher(self, name: str, tags: dict[str, str] | None = None) -> tuple[Any, str]:
        """An IAM user (tagged as given) and an SSM client signed with its own keys."""
        iam = self.sandbox.client("iam")
        arn = iam.create_user(UserName=name, Tags=[{"Key": k, "Value": v} for k, v in (tags or {}).items()])[
            "User"
        ]["Arn"]
        key = iam.create_access_key(UserName=name)["AccessKey"]
        client = boto3.client(
            "ssm",
            region_name=self.sandbox.region,
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
            aws_session_token=None,
        )
        return client, arn

    def start_sessions(self, ssm: Any, count: int) -> list[str]:
        """``count`` sessions, one simulated second apart (oldest first)."""
        started = []
        for n in range(count):
            started.append(ssm.start_session(Target=self.targets[n % len(self.targets)])["SessionId"])
            self.sandbox.advance(1)
        return started

    def just_after_a_scheduled_run(self) -> None:
        """Step the clock until the session guard's schedule fires (then 5 simulated minutes are ours);
        the run it started is over on return."""
        fired, runs = self.scheduled_runs(), self.guard_runs()
        wait_for(lambda: self.scheduled_runs() > fired or None, what="scheduled run", advance=self.sandbox)
        self.wait_for_guard_runs(runs + 1)

    def scheduled_runs(self) -> int:
        return int(self.sandbox.metrics()["scheduled_events"].get(SCHEDULE, 0))

    def guard_runs(self) -> int:
        """SessionGuardFunction's finished invocations. The tests wait on these, not on the whole
        sandbox going idle: another function's failed run waits a simulated minute for its retry."""
        function = self.sandbox.metrics()["invocations"].get("SessionGuardFunction", {})
        return int(function.get("invocations", 0))

    def wait_for_guard_runs(self, count: int) -> None:
        wait_for(lambda: self.guard_runs() >= count or None, what=f"{count} SessionGuardFunction runs")

    def deliver_cloudtrail(self, started: list[str], *, checked: bool = True) -> dict[str, dict[str, Any]]:
        """CloudTrail's delay passes: the StartSession records of ``started`` reach the bus (an audit
        rule sees each) and, when ``checked``, SessionGuardFunction ran once for each. Returns the
        records by session id."""
        runs = self.guard_runs()
        self.sandbox.advance(self.sandbox.ssm.cloudtrail_delay_seconds)
        seen: dict[str, dict[str, Any]] = {}

        def all_seen() -> dict[str, dict[str, Any]] | None:
            for body in self.drain(self.cloudtrail_queue):
                event = json.loads(body)
                seen[event["detail"]["responseElements"]["sessionId"]] = event
            return seen if set(started) <= set(seen) else None

        wait_for(all_seen, what="CloudTrail records of the sessions")
        if checked:
            self.wait_for_guard_runs(runs + len(started))
        return seen

    def live_sessions(self, ssm: Any, owner: str) -> list[str]:
        """The owner's Active sessions not being terminated, oldest first."""
        sessions = ssm.describe_sessions(State="Active", Filters=[{"key": "Owner", "value": owner}])[
            "Sessions"
        ]
        live = sorted((s for s in sessions if s["Status"] != "Terminating"), key=lambda s: s["StartDate"])
        return [s["SessionId"] for s in live]

    def records(self, principal: str) -> dict[str, SessionTermination]:
        table = self.sandbox.stack.resources["StateTable"].physical_id
        found = SessionTerminations(table, self.sandbox.client("dynamodb")).list_for_cluster(CLUSTER)
        return {r.session_id: r for r in found if r.principal == principal}

    def terminated(self, principal: str, count: int) -> dict[str, SessionTermination]:
        """The principal's termination records, once ``count`` of them are final."""

        def final() -> dict[str, SessionTermination] | None:
            records = self.records(principal)
            done = [r for r in records.values() if r.terminated_at is not None]
            return records if len(done) >= count else None

        return wait_for(final, what=f"{count} terminations of {principal}")

    def drain(self, queue_url: str) -> list[str]:
        sqs = self.sandbox.client("sqs")
        bodies: list[str] = []
        while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
            bodies += [m["Body"] for m in messages]
            for m in messages:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
        return bodies

    def session_events(self) -> list[dict[str, Any]]:
        """The Session Terminated events the notifications topic carried since the last call."""
        events = [json.loads(body) for body in self.drain(self.notifications_queue)]
        return [e for e in events if e.get("detail-type") == "Session Terminated"]

    def collect[T](self, read: Callable[[], list[T]], count: int, what: str) -> list[T]:
        """Read until ``count`` items came (deliveries through SNS are asynchronous)."""
        got: list[T] = []

        def enough() -> list[T] | None:
            got.extend(read())
            return got if len(got) >= count else None

        return wait_for(enough, what=what)

    def alerts(self) -> list[str]:
        return self.drain(self.alerts_queue)

    def terminate_calls(self) -> int:
        return int(self.sandbox.metrics()["aws_calls"].get("ssm:TerminateSession", 0))


@pytest.fixture(scope="module")
def site(sandbox: Sandbox, api: Any, workshop_request: Callable[..., dict[str, Any]]) -> Site:
    accepted = api.create_cluster(workshop_request(CLUSTER))
    done = wait_for(
        lambda: op if (op := api.get_operation(accepted["operationId"]))["status"] != "RUNNING" else None,
        what="finished create",
        advance=sandbox,
    )
    assert done["status"] == "SUCCEEDED", done.get("error")
    sagemaker = sandbox.client("sagemaker")
    cluster_id = sagemaker.describe_cluster(ClusterName=CLUSTER)["ClusterArn"].rsplit("/", 1)[-1]
    nodes = sagemaker.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
    targets = [
        f"sagemaker-cluster:{cluster_id}_{n['InstanceGroupName']}-{n['InstanceId']}"
        for n in nodes
        if n["InstanceStatus"]["Status"] == "Running"
    ]
    assert targets

    # What an operator subscribes: the alerts and notifications topics, and an audit rule on the trail.
    sns, events = sandbox.client("sns"), sandbox.client("events")
    queues = {}
    for name, topic in [("alerts", "AlertsTopicArn"), ("notifications", "NotificationsTopicArn")]:
        url, arn = _queue(sandbox, f"e2e-{name}")
        sns.subscribe(
            TopicArn=sandbox.stack.outputs[topic],
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        queues[name] = url
    audit_url, audit_arn = _queue(sandbox, "e2e-start-session-audit")
    rule_arn = events.put_rule(Name="e2e-start-session-audit", EventPattern=json.dumps(START_SESSION))[
        "RuleArn"
    ]
    bus.let_rule_send_to_queue(sandbox.client("sqs"), audit_url, audit_arn, rule_arn)
    events.put_targets(Rule="e2e-start-session-audit", Targets=[{"Id": "audit", "Arn": audit_arn}])
    return Site(sandbox, targets, queues["alerts"], queues["notifications"], audit_url)


def test_a_user_with_four_sessions_and_a_limit_of_two_keeps_the_two_oldest(site: Site) -> None:
    ssm, alice = site.researcher("alice", {"SSMSessionRunAs": "alice"})
    site.just_after_a_scheduled_run()
    site.session_events()  # what came before is not this test's

    started = site.start_sessions(ssm, 4)
    site.deliver_cloudtrail(started)

    records = site.terminated(alice, 2)
    assert set(records) == set(started[2:])
    assert site.live_sessions(ssm, alice) == started[:2]
    for session_id in started[2:]:
        record = records[session_id]
        assert (record.reason, record.limit, record.run_as) == (TerminationReason.OVER_LIMIT, 2, "alice")
        assert record.trigger == "event"  # the CloudTrail record did it, not the schedule
    events = site.collect(site.session_events, 2, "two Session Terminated events")
    assert sorted(e["detail"]["sessionId"] for e in events) == sorted(started[2:])
    assert {e["detail"]["reason"] for e in events} == {"over-limit"}
    assert {e["detail"]["clusterName"] for e in events} == {CLUSTER}
    assert not [a for a in site.alerts() if alice in a]  # a limit is routine: no alert
    assert site.sandbox.metrics()["iam_denials"] == []


def test_an_unmapped_principal_is_refused_with_an_alert(site: Site) -> None:
    ssm, mallory = site.researcher("mallory")  # no SSMSessionRunAs tag
    root_ssm, eve = site.researcher("eve", {"SSMSessionRunAs": "root"})
    site.just_after_a_scheduled_run()

    [refused] = site.start_sessions(ssm, 1)
    [as_root] = site.start_sessions(root_ssm, 1)
    site.deliver_cloudtrail([refused, as_root])

    assert site.terminated(mallory, 1)[refused].reason is TerminationReason.RUN_AS_MISSING
    record = site.terminated(eve, 1)[as_root]
    assert (record.reason, record.run_as) == (TerminationReason.RUN_AS_FORBIDDEN, "root")
    assert site.live_sessions(ssm, mallory) == []
    assert site.live_sessions(root_ssm, eve) == []
    alerts = site.collect(site.alerts, 2, "two alerts")
    [about_mallory] = [a for a in alerts if mallory in a]
    assert "no SSMSessionRunAs tag" in about_mallory
    assert refused in about_mallory
    [about_eve] = [a for a in alerts if eve in a]
    assert "'root'" in about_eve
    assert site.sandbox.metrics()["iam_denials"] == []


def test_a_duplicated_event_terminates_nothing_extra(site: Site) -> None:
    ssm, bob = site.researcher("bob", {"SSMSessionRunAs": "bob", "autopilot:max-sessions": "1"})
    site.just_after_a_scheduled_run()
    site.session_events()
    started = site.start_sessions(ssm, 2)
    records = site.deliver_cloudtrail(started)
    assert list(site.terminated(bob, 1)) == [started[1]]
    site.collect(site.session_events, 1, "the Session Terminated event")
    calls, runs = site.terminate_calls(), site.guard_runs()

    # EventBridge delivers at least once: the same record arrives twice more.
    record = records[started[1]]
    for _ in range(2):
        bus.emit(
            record["source"],
            record["detail-type"],
            record["detail"],
            region=record["region"],
            account_id=record["account"],
        )
    site.wait_for_guard_runs(runs + 2)

    assert site.terminate_calls() == calls
    assert site.live_sessions(ssm, bob) == started[:1]
    assert list(site.records(bob)) == [started[1]]
    assert site.session_events() == []


def test_the_schedule_catches_a_session_whose_event_was_lost(site: Site) -> None:
    ssm, carol = site.researcher("carol", {"SSMSessionRunAs": "carol"})
    events = site.sandbox.client("events")
    rule = site.sandbox.stack.resources["SessionGuardRule"].physical_id
    site.just_after_a_scheduled_run()

    # The records go by while the rule is off: SessionGuard never sees them.
    events.disable_rule(Name=rule)
    try:
        started = site.start_sessions(ssm, 3)
        site.deliver_cloudtrail(started, checked=False)
        assert site.live_sessions(ssm, carol) == started
        assert site.records(carol) == {}
    finally:
        events.enable_rule(Name=rule)

    site.just_after_a_scheduled_run()

    [(session_id, record)] = site.terminated(carol, 1).items()
    assert (session_id, record.trigger, record.reason) == (
        started[2],
        "schedule",
        TerminationReason.OVER_LIMIT,
    )
    assert site.live_sessions(ssm, carol) == started[:2]
    assert site.sandbox.metrics()["iam_denials"] == []
