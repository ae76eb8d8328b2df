"""SessionGuard's rules, pure: which targets are HyperPod nodes, a principal judged by its tags, the
sessions beyond a limit newest first, the IAM entity whose tags apply, what CloudTrail's StartSession
record names, a credentials' expiry as CloudTrail writes it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from autopilot.logic.session_guard import Verdict, expires_at, iam_entity, judge, over_limit
from autopilot.models.sessions import ActiveSession, TerminationReason, hyperpod_cluster_id

from tests.unit.session_guard_support import (
    ACCOUNT,
    CLUSTER_ID,
    EC2_INSTANCE,
    NODES,
    START,
    start_session_call,
    user_arn,
)


# -- the rules, pure ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "cluster_id"),
    [
        (NODES[0], CLUSTER_ID),
        ("sagemaker-cluster:p1q2r3s4t5u6_login-group-i-0123456789abcdef0", "p1q2r3s4t5u6"),
        (EC2_INSTANCE, None),
        ("mi-0123456789abcdef0", None),
        ("sagemaker-cluster:", None),
        ("sagemaker-cluster:abcd1234efgh", None),
    ],
)
def test_only_hyperpod_targets_have_a_cluster(target: str, cluster_id: str | None) -> None:
    assert hyperpod_cluster_id(target) == cluster_id


@pytest.mark.parametrize(
    ("tags", "verdict"),
    [
        ({}, Verdict(2, None, TerminationReason.RUN_AS_MISSING)),
        ({"SSMSessionRunAs": " "}, Verdict(2, None, TerminationReason.RUN_AS_MISSING)),
        ({"SSMSessionRunAs": "root"}, Verdict(2, "root", TerminationReason.RUN_AS_FORBIDDEN)),
        ({"SSMSessionRunAs": "ssm-user"}, Verdict(2, "ssm-user", TerminationReason.RUN_AS_FORBIDDEN)),
        ({"SSMSessionRunAs": "alice"}, Verdict(2, "alice", None)),
        ({"SSMSessionRunAs": "alice", "autopilot:max-sessions": "5"}, Verdict(5, "alice", None)),
        ({"SSMSessionRunAs": "alice", "autopilot:max-sessions": "0"}, Verdict(0, "alice", None)),
        # a malformed override neither lifts nor zeroes the limit
        ({"SSMSessionRunAs": "alice", "autopilot:max-sessions": "lots"}, Verdict(2, "alice", None)),
        ({"SSMSessionRunAs": "alice", "autopilot:max-sessions": "-1"}, Verdict(2, "alice", None)),
    ],
)
def test_a_principal_is_judged_by_its_tags(tags: dict[str, str], verdict: Verdict) -> None:
    assert judge(tags, default_limit=2, forbidden_run_as=frozenset({"root", "ssm-user"})) == verdict


def active(session_id: str, minute: int, status: str = "Connected") -> ActiveSession:
    return ActiveSession(
        SessionId=session_id,
        Target=NODES[0],
        Owner=user_arn("alice"),
        Status=status,
        StartDate=START + timedelta(minutes=minute),
    )


def test_the_newest_sessions_beyond_the_limit_go_newest_first() -> None:
    sessions = [active("s3", 3), active("s1", 1), active("s4", 4), active("s2", 2)]

    doomed = over_limit(sessions, Verdict(2, "alice", None))

    assert [(s.SessionId, reason) for s, reason in doomed] == [
        ("s4", TerminationReason.OVER_LIMIT),
        ("s3", TerminationReason.OVER_LIMIT),
    ]
    assert over_limit(sessions, Verdict(4, "alice", None)) == []
    assert [s.SessionId for s, _ in over_limit(sessions, Verdict(0, "alice", None))] == [
        "s4",
        "s3",
        "s2",
        "s1",
    ]


def test_terminating_sessions_count_for_nothing() -> None:
    sessions = [
        active("s1", 1),
        active("s2", 2, "Terminating"),
        active("s3", 3),
        active("s4", 4, "Disconnected"),
    ]

    doomed = over_limit(sessions, Verdict(2, "alice", None))

    assert [s.SessionId for s, _ in doomed] == ["s4"]


def test_a_refused_principal_loses_every_live_session() -> None:
    sessions = [active("s1", 1), active("s2", 2, "Terminating"), active("s3", 3)]

    doomed = over_limit(sessions, Verdict(2, None, TerminationReason.RUN_AS_MISSING))

    assert [(s.SessionId, r) for s, r in doomed] == [
        ("s3", TerminationReason.RUN_AS_MISSING),
        ("s1", TerminationReason.RUN_AS_MISSING),
    ]


@pytest.mark.parametrize(
    ("arn", "entity"),
    [
        (user_arn("alice"), ("user", "alice")),
        (f"arn:aws:iam::{ACCOUNT}:user/team/a/bob", ("user", "bob")),
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/Researcher/dave", ("role", "Researcher")),
        (f"arn:aws:iam::{ACCOUNT}:role/service/Researcher", ("role", "Researcher")),
        (f"arn:aws:iam::{ACCOUNT}:root", None),
        ("not-an-arn", None),
    ],
)
def test_the_iam_entity_whose_tags_apply(arn: str, entity: tuple[str, str] | None) -> None:
    assert iam_entity(arn) == entity


def test_the_cloudtrail_record_names_principal_target_and_session() -> None:
    call = start_session_call()
    assert call.started == (
        user_arn("alice"),
        "sagemaker-cluster:abcd1234efgh_worker-group-1-i-0123456789abcdef0",
        "alice-0a1b2c3d4e5f67890",
    )
    # a refused StartSession started nothing
    assert start_session_call(errorCode="TargetNotConnected", responseElements=None).started is None


@pytest.mark.parametrize(
    ("expiration", "expected"),
    [
        ("Oct 2, 2019, 11:12:29 PM", datetime(2019, 10, 2, 23, 12, 29, tzinfo=UTC)),
        ("2026-03-10T10:00:00Z", datetime(2026, 3, 10, 10, 0, tzinfo=UTC)),
        (None, START + timedelta(hours=12)),
        ("soon", START + timedelta(hours=12)),
    ],
)
def test_the_credentials_expiry_as_cloudtrail_writes_it(expiration: str | None, expected: datetime) -> None:
    assert expires_at(expiration, START) == expected
