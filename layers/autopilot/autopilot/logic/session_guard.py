"""SessionGuard: per-person SSM session limits and Run-As checks on registered HyperPod clusters.

Two triggers run the same rules. CloudTrail's StartSession record (through EventBridge) checks the
person that started a session, on that session's cluster; the schedule checks every Active
session, for the sessions whose record was lost or late (CloudTrail's delivery is best effort).

Sessions are counted per person as the API decides ownership (autopilot.logic.callers.person): an
IAM user; an IAM Identity Center user (``assumed-role/AWSReservedSSO_<set>_<hex>/<user>``: one role
for every user of the permission set, the session name is the user); any other role session counts
with every session of its role, because the AssumeRole caller picks the session name (one role and
a new name per session used to evade the limit). ``OwnerMatching=session`` counts those per session.

For one person on one cluster (a registered cluster whose ARN ends in the target's cluster id):
- no ``SSMSessionRunAs`` tag on its IAM user or role, or a tag naming a forbidden user (root,
  ssm-user, ...): every session it holds there is terminated, with an alert;
- otherwise its sessions beyond its limit (the ``autopilot:max-sessions`` tag, else
  MaxSessionsPerUser) are terminated newest first, so the oldest, the ones it already works in, stay.
Session tags: Session Manager also honours ``SSMSessionRunAs`` as a *session tag* (AssumeRole's
``Tags``, a SAML or OIDC IdP's ``PrincipalTag``), which overrides the role's own tag and which neither
DescribeSessions nor StartSession's record shows. CloudTrail's record of the AssumeRole* call that
made the session does: ``SessionTagsRule`` delivers those carrying the tag, the guard keeps it per
session ARN (autopilot.dal.session_tags) and judges each session by it until its credentials expire.
The IAM guardrail that keeps callers from choosing it is in docs/operations.md ("Session limits").
Each termination is claimed in the state table first (autopilot.dal.session_terminations), so a
duplicated event, a retry and the schedule never terminate, record, alert or emit one session twice.
Only HyperPod targets (``sagemaker-cluster:``) are ever looked at.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from botocore.exceptions import ClientError

from autopilot import clock
from autopilot.aws import LazyClient
from autopilot.dal.session_tags import SessionRunAsTags
from autopilot.dal.session_terminations import CLAIM_LEASE, SessionTerminations
from autopilot.dal.state_store import every_cluster
from autopilot.dal.state_table import StateTable
from autopilot.emitted_events import SessionTerminatedEventDetail, emit_session_terminated
from autopilot.logic.callers import person
from autopilot.models.records import iso
from autopilot.models.sessions import (
    MAX_SESSIONS_TAG,
    RUN_AS_TAG,
    ActiveSession,
    AssumeRoleCall,
    SessionTermination,
    StartSessionCall,
    TerminationReason,
    Trigger,
    hyperpod_cluster_id,
)
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_ssm import SSMClient

    from autopilot.dal.state_store import StateStore
    from autopilot.settings import SessionGuardSettings

# Outcome counters, per session looked at (the handler returns them; the logs carry them).
TERMINATED = "terminated"
ALREADY_RECORDED = "already_recorded"
KEPT = "kept"
NOT_HYPERPOD = "not_hyperpod"
UNREGISTERED_CLUSTER = "unregistered_cluster"
ENDING = "ending"  # Terminating already: neither counted nor terminated again
NOT_STARTED = "not_started"

_ENDING_STATUS = "Terminating"
MAX_ROLE_SESSION = timedelta(hours=12)
SESSION_TAG_RECORDED = "session_tag_recorded"
_PAGE_SIZE = 200  # DescribeSessions' maximum


@dataclass(frozen=True)
class Verdict:
    """What applies to one principal: its limit, its Run-As user, and why it is refused (if it is)."""

    limit: int
    run_as: str | None
    refusal: TerminationReason | None


def judge(tags: dict[str, str], *, default_limit: int, forbidden_run_as: frozenset[str]) -> Verdict:
    """The principal's verdict from its IAM tags."""
    limit = default_limit
    raw_limit = tags.get(MAX_SESSIONS_TAG)
    if raw_limit is not None:
        if raw_limit.strip().isdigit():
            limit = int(raw_limit)
        else:  # a typo in a tag must not lift or zero the limit: the default holds, and the log says why
            logger.warning("ignoring a malformed session limit tag", tag=MAX_SESSIONS_TAG, value=raw_limit)
    run_as = tags.get(RUN_AS_TAG, "").strip() or None
    if run_as is None:
        return Verdict(limit, None, TerminationReason.RUN_AS_MISSING)
    if run_as in forbidden_run_as:
        return Verdict(limit, run_as, TerminationReason.RUN_AS_FORBIDDEN)
    return Verdict(limit, run_as, None)


def over_limit(
    sessions: Iterable[ActiveSession],
    verdict: Verdict,
    verdict_of: Callable[[ActiveSession], Verdict] | None = None,
) -> list[tuple[ActiveSession, TerminationReason]]:
    """The sessions to terminate, newest first: every refused one (by ``verdict_of`` the session, else
    the principal's ``verdict``), then those beyond the principal's limit counted from the oldest of
    the others. Sessions already Terminating count for nothing."""
    judged = verdict_of or (lambda _: verdict)
    live = sorted(
        (s for s in sessions if s.Status != _ENDING_STATUS), key=lambda s: (s.StartDate, s.SessionId)
    )
    refused = [(s, reason) for s in reversed(live) if (reason := judged(s).refusal) is not None]
    allowed = [s for s in live if judged(s).refusal is None]
    return refused + [(s, TerminationReason.OVER_LIMIT) for s in reversed(allowed[verdict.limit :])]


def expires_at(expiration: str | None, now: datetime) -> datetime:
    """When a session's credentials expire, from CloudTrail's ``credentials.expiration`` (AWS writes it as
    ``Nov 27, 2026, 10:00:00 PM``; ISO 8601 is read too); unreadable or absent: now + 12 h, the longest a
    role session lasts."""
    for parse in (datetime.fromisoformat, lambda t: datetime.strptime(t, "%b %d, %Y, %I:%M:%S %p")):
        try:
            parsed = parse(expiration or "")
        except ValueError:
            continue
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return now + MAX_ROLE_SESSION


def iam_entity(principal_arn: str) -> tuple[Literal["user", "role"], str] | None:
    """The IAM user or role whose tags apply to a session owner: an IAM user's ARN, an assumed role's
    (``arn:aws:sts::<account>:assumed-role/<role>/<session>``) or a role's; None for anything else
    (the account root has no tags)."""
    parts = principal_arn.split(":", 5)
    if len(parts) != 6:
        return None
    kind, _, rest = parts[5].partition("/")
    if kind == "user" and rest:
        return "user", rest.rsplit("/", 1)[-1]
    if kind == "assumed-role" and "/" in rest:
        return "role", rest.split("/", 1)[0]
    if kind == "role" and rest:
        return "role", rest.rsplit("/", 1)[-1]
    return None


class PrincipalTags:
    """IAM tags of session owners, read once per invocation (many sessions share an owner)."""

    def __init__(self, iam: IAMClient) -> None:
        self._iam = iam
        self._cache: dict[tuple[str, str], dict[str, str]] = {}

    def of(self, principal_arn: str) -> dict[str, str]:
        entity = iam_entity(principal_arn)
        if entity is None:
            return {}
        if entity not in self._cache:
            self._cache[entity] = self._read(*entity)
        return self._cache[entity]

    def _read(self, kind: Literal["user", "role"], name: str) -> dict[str, str]:
        tags: dict[str, str] = {}
        try:
            if kind == "user":
                for page in self._iam.get_paginator("list_user_tags").paginate(UserName=name):
                    tags |= {t["Key"]: t["Value"] for t in page["Tags"]}
            else:
                for page in self._iam.get_paginator("list_role_tags").paginate(RoleName=name):
                    tags |= {t["Key"]: t["Value"] for t in page["Tags"]}
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "NoSuchEntity":
                raise
            return {}  # deleted since: nothing maps it to a user any more
        return tags


class SessionGuard:
    ssm: LazyClient[SSMClient] = LazyClient("ssm")
    iam: LazyClient[IAMClient] = LazyClient("iam")
    sns: LazyClient[SNSClient] = LazyClient("sns")
    events: LazyClient[EventBridgeClient] = LazyClient("events")

    def __init__(
        self,
        settings: SessionGuardSettings,
        *,
        registry: StateStore | None = None,
        terminations: SessionTerminations | None = None,
        session_tags: SessionRunAsTags | None = None,
        ssm: SSMClient | None = None,
        iam: IAMClient | None = None,
        sns: SNSClient | None = None,
        events: EventBridgeClient | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.registry: StateStore = registry or StateTable(settings.state_table_name)
        self.terminations = terminations or SessionTerminations(settings.state_table_name)
        self.session_tags = session_tags or SessionRunAsTags(settings.state_table_name)
        self._ssm, self._iam, self._sns, self._events = ssm, iam, sns, events
        self.now = now or (lambda: clock.now())  # noqa: PLW0108  (read at each call: the sandbox sets it)

    # -- the triggers -----------------------------------------------------------------------------
    def on_assume_role(self, call: AssumeRoleCall) -> dict[str, int]:
        """CloudTrail's record of an AssumeRole* call: keep the session's SSMSessionRunAs session tag."""
        found = call.run_as
        if found is None:
            return {}
        session_arn, run_as, expiration = found
        now = self.now()
        self.session_tags.record(session_arn, run_as, expires=expires_at(expiration, now))
        logger.info("ssm run-as session tag recorded", session=session_arn, run_as=run_as)
        return {SESSION_TAG_RECORDED: 1}

    def on_start_session(self, call: StartSessionCall) -> dict[str, int]:
        """CloudTrail's StartSession record: check its principal on its session's cluster."""
        outcomes: Counter[str] = Counter()
        started = call.started
        if started is None:
            outcomes[NOT_STARTED] += 1
            return dict(outcomes)
        principal, target, _ = started
        who = person(principal, matching=self.settings.owner_matching)
        cluster_id = hyperpod_cluster_id(target)
        if cluster_id is None:
            outcomes[NOT_HYPERPOD] += 1
            return dict(outcomes)
        cluster_name = self._registered_clusters().get(cluster_id)
        if cluster_name is None:
            outcomes[UNREGISTERED_CLUSTER] += 1
            return dict(outcomes)
        # DescribeSessions' Target filter matches one node exactly, its Owner filter one ARN: the Owner
        # filter narrows the read to a person who is one ARN, and the cluster's nodes are picked from
        # their targets. A role's sessions have an ARN each: those are read all and picked by person.
        sessions = [
            s
            for s in self._active_sessions(owner=principal if who == principal else None)
            if hyperpod_cluster_id(s.Target) == cluster_id
            and person(s.Owner, matching=self.settings.owner_matching) == who
        ]
        self._enforce(
            principal=who,
            cluster_name=cluster_name,
            sessions=sessions,
            trigger="event",
            tags=PrincipalTags(self.iam),
            outcomes=outcomes,
        )
        return dict(outcomes)

    def sweep(self) -> dict[str, int]:
        """The schedule: every Active session on a registered cluster, by person and cluster."""
        outcomes: Counter[str] = Counter()
        clusters = self._registered_clusters()
        groups: defaultdict[tuple[str, str], list[ActiveSession]] = defaultdict(list)
        for session in self._active_sessions():
            cluster_id = hyperpod_cluster_id(session.Target)
            if cluster_id is None:
                outcomes[NOT_HYPERPOD] += 1
            elif cluster_id not in clusters:
                outcomes[UNREGISTERED_CLUSTER] += 1
            else:
                who = person(session.Owner, matching=self.settings.owner_matching)
                groups[(who, clusters[cluster_id])].append(session)
        tags = PrincipalTags(self.iam)
        for (principal, cluster_name), sessions in sorted(groups.items()):
            self._enforce(
                principal=principal,
                cluster_name=cluster_name,
                sessions=sessions,
                trigger="schedule",
                tags=tags,
                outcomes=outcomes,
            )
        return dict(outcomes)

    # -- rules ------------------------------------------------------------------------------------
    def _enforce(
        self,
        *,
        principal: str,
        cluster_name: str,
        sessions: list[ActiveSession],
        trigger: Trigger,
        tags: PrincipalTags,
        outcomes: Counter[str],
    ) -> None:
        principal_tags = tags.of(principal)
        verdict = judge(
            principal_tags,
            default_limit=self.settings.max_sessions_per_user,
            forbidden_run_as=self.settings.forbidden_run_as,
        )
        verdicts: dict[str, Verdict] = {}

        def verdict_of(session: ActiveSession) -> Verdict:
            """A session tag overrides the role's SSMSessionRunAs, for that session."""
            if session.Owner not in verdicts:
                tagged = self.session_tags.run_as(session.Owner, now=self.now())
                verdicts[session.Owner] = (
                    verdict
                    if tagged is None
                    else judge(
                        principal_tags | {RUN_AS_TAG: tagged},
                        default_limit=self.settings.max_sessions_per_user,
                        forbidden_run_as=self.settings.forbidden_run_as,
                    )
                )
            return verdicts[session.Owner]

        doomed = over_limit(sessions, verdict, verdict_of)
        outcomes[ENDING] += sum(1 for s in sessions if s.Status == _ENDING_STATUS)
        outcomes[KEPT] += sum(1 for s in sessions if s.Status != _ENDING_STATUS) - len(doomed)
        for session, reason in doomed:
            done = self._terminate(session, cluster_name, reason, verdict_of(session), trigger)
            outcomes[TERMINATED if done else ALREADY_RECORDED] += 1

    def _terminate(
        self,
        session: ActiveSession,
        cluster_name: str,
        reason: TerminationReason,
        verdict: Verdict,
        trigger: Trigger,
    ) -> bool:
        """Claim, terminate, record, tell; False when another delivery already did (or is doing) it."""
        now = self.now()
        termination = SessionTermination(
            cluster_name=cluster_name,
            session_id=session.SessionId,
            target=session.Target,
            principal=session.Owner,
            reason=reason,
            trigger=trigger,
            session_started_at=session.StartDate,
            claimed_at=now,
            limit=verdict.limit if reason is TerminationReason.OVER_LIMIT else None,
            run_as=verdict.run_as,
        )
        if not self.terminations.claim(termination, stale_before=now - CLAIM_LEASE):
            return False
        try:
            self.ssm.terminate_session(SessionId=session.SessionId)
        except ClientError:
            self.terminations.release(termination)
            raise
        logger.info(
            "ssm session terminated",
            cluster=cluster_name,
            session_id=session.SessionId,
            principal=session.Owner,
            reason=reason.value,
            trigger=trigger,
        )
        self.terminations.complete(termination, self.now())
        # An alert or event that cannot be sent fails the invocation: its retries, then the function's
        # dead-letter queue and alarm, make that visible. The session stays terminated and recorded.
        if reason is not TerminationReason.OVER_LIMIT:
            self._alert(termination)
        emit_session_terminated(
            SessionTerminatedEventDetail(
                cluster_name=cluster_name,
                session_id=session.SessionId,
                target=session.Target,
                principal=session.Owner,
                reason=reason.value,
                trigger=trigger,
                limit=termination.limit,
                run_as=termination.run_as,
            ),
            client=self.events,
        )
        return True

    def _alert(self, termination: SessionTermination) -> None:
        if termination.reason is TerminationReason.RUN_AS_MISSING:
            why = (
                f"{termination.principal} has no {RUN_AS_TAG} tag, so Session Manager cannot map it to a "
                f"POSIX user. Tag its IAM user or role with {RUN_AS_TAG}=<user> to let it in."
            )
        else:
            why = (
                f"{termination.principal} is mapped ({RUN_AS_TAG}) to the user '{termination.run_as}', "
                "which ForbiddenRunAsUsers refuses. Map it to the researcher's own POSIX user."
            )
        self.sns.publish(
            TopicArn=self.settings.alerts_topic_arn,
            Subject=f"HyperPod SSM session refused on {termination.cluster_name}"[:100],
            Message="\n".join(
                [
                    why,
                    "",
                    f"cluster: {termination.cluster_name}",
                    f"session: {termination.session_id} (terminated)",
                    f"target: {termination.target}",
                    f"principal: {termination.principal}",
                    f"reason: {termination.reason.value}",
                    f"started: {iso(termination.session_started_at)}",
                ]
            ),
        )

    # -- reads ------------------------------------------------------------------------------------
    def _registered_clusters(self) -> dict[str, str]:
        """HyperPod cluster id (the last part of its ARN) → registered cluster name."""
        return {
            cluster.cluster_arn.rsplit("/", 1)[-1]: cluster.cluster_name
            for cluster in every_cluster(self.registry)
            if cluster.cluster_arn
        }

    def _active_sessions(self, owner: str | None = None) -> list[ActiveSession]:
        paginator = self.ssm.get_paginator("describe_sessions")
        pages = (
            paginator.paginate(
                State="Active",
                Filters=[{"key": "Owner", "value": owner}],
                PaginationConfig={"PageSize": _PAGE_SIZE},
            )
            if owner is not None
            else paginator.paginate(State="Active", PaginationConfig={"PageSize": _PAGE_SIZE})
        )
        return [ActiveSession.model_validate(s) for page in pages for s in page.get("Sessions", [])]
