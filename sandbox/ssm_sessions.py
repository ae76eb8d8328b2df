"""SSM Session Manager simulator: StartSession / DescribeSessions / TerminateSession on moto.

moto 5.2.5's SSM has no sessions. :func:`_patch_moto_ssm_response` (the one seam) adds the three
operations to moto's ``SimpleSystemManagerResponse`` so they answer boto3 under ``mock_aws`` and
over HTTP from ``ThreadedMotoServer`` alike; moto serializes the results against botocore's ssm
model. The state lives here, in the :class:`SsmSessionsSimulator` of the request's account and region,
and time comes from the :class:`SandboxClock`. Session Manager answers in every region, so the
sandbox does too: the simulators installed by hand (the Sandbox's home region, a test's) are
*installed*; a request for any other (account, region) gets one *spawned* from the first installed
one on first use (same clock and options), ticked with it and gone when it is uninstalled.

StartSession reaches only a connected target: by default a live HyperPod node of that account and
region, ``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>`` (see
:func:`hyperpod_node_targets`); anything else is ``TargetNotConnected``. Caller identities are IAM
ARNs, as AWS spells them: an IAM user's ``arn:aws:iam::…:user/…``, an assumed role's
``arn:aws:sts::…:assumed-role/<role>/<session>`` (the AWS CLI reference's DescribeSessions example),
and the sandbox's own keys (which moto reports as ``sts::…:user/moto``) the account root.

Every StartSession (through the API or :meth:`SsmSessionsSimulator.start_session_as`) also puts
the CloudTrail-shaped ``AWS API Call via CloudTrail`` event on that region's EventBridge bus, as a
trail would, *after* the call returned: CloudTrail's delivery to EventBridge is best effort and
delayed, so the event is queued ``cloudtrail_delay_seconds`` of simulated time and published by
:meth:`SsmSessionsSimulator.tick`. The SessionGuard rule matches it with moto's real pattern matcher.

Behaviour chosen where AWS documents none (unverified):
- a session starts ``Connected``; TerminateSession makes it ``Terminating`` (still Active) and
  ``Terminated`` (History) ``terminating_seconds`` later;
- TerminateSession of an unknown or already ended session succeeds and echoes the id (the
  operation models no not-found error);
- DescribeSessions lists newest first; several filters are ANDed;
- the CloudTrail delay (default 30 simulated seconds) and the Terminating time (default 5);
- with ``max_session_duration_minutes`` given, sessions older than that end as ``Terminated``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from moto.core.exceptions import ServiceException
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult
from moto.iam.models import iam_backends
from moto.ssm.exceptions import InvalidDocument
from moto.ssm.models import ssm_backends
from moto.ssm.responses import SimpleSystemManagerResponse
from moto.sts.models import sts_backends

from sandbox import bus
from sandbox.clock import SandboxClock
from sandbox.hyperpod import HyperPodSimulator

DEFAULT_DOCUMENT = "SSM-SessionManagerRunShell"
"""What DescribeSessions shows as DocumentName when StartSession named none (a plain shell)."""

AWS_SESSION_DOCUMENTS = frozenset(
    {
        DEFAULT_DOCUMENT,
        "AWS-StartInteractiveCommand",
        "AWS-StartNonInteractiveCommand",
        "AWS-StartPortForwardingSession",
        "AWS-StartPortForwardingSessionToRemoteHost",
        "AWS-StartPortForwardingSessionToSocket",
        "AWS-StartSSHSession",
    }
)
"""AWS-owned Session documents every account has; account documents come from moto's SSM."""

FILTER_KEYS = ("InvokedAfter", "InvokedBefore", "Target", "Owner", "Status", "SessionId", "AccessType")
SESSION_STATUSES = ("Connected", "Connecting", "Disconnected", "Terminated", "Terminating", "Failed")
ACTIVE_STATUSES = frozenset({"Connected", "Connecting", "Disconnected", "Terminating"})
HISTORY_STATUSES = frozenset({"Terminated", "Failed"})
ACCESS_TYPES = ("Standard", "JustInTime")
MAX_FILTERS = 6
MAX_RESULTS_RANGE = (1, 200)
OPERATIONS = ("StartSession", "DescribeSessions", "TerminateSession")

_CLOUDTRAIL_TOKEN_REDACTED = "Value hidden due to security reasons."  # noqa: S105 - CloudTrail's text
_MOTO_DEFAULT_USER = "user/moto"  # moto's caller for keys it does not know: the sandbox's own
_DEFAULT_USER_AGENT = (
    "aws-cli/2.17.0 md/awscrt#0.20.11 ua/2.0 os/linux md/arch#x86_64 command/ssm.start-session"
)


class SessionsError(ServiceException):
    """An SSM error as the API returns it (code + message); also raised by the scenario helpers."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


def _constraint_error(problems: Sequence[str]) -> SessionsError:
    """AWS's request-validation wording: ``N validation error(s) detected: ...; ...``."""
    noun = "error" if len(problems) == 1 else "errors"
    return SessionsError(
        "ValidationException", f"{len(problems)} validation {noun} detected: " + "; ".join(problems)
    )


@dataclass(frozen=True)
class CallerIdentity:
    """Who called: the fields CloudTrail's ``userIdentity`` and DescribeSessions' ``Owner`` need."""

    type: Literal["IAMUser", "AssumedRole", "Root"]
    arn: str
    principal_id: str
    account_id: str
    access_key_id: str | None = None
    user_name: str | None = None  # IAMUser
    role_arn: str | None = None  # AssumedRole: the session issuer
    role_id: str | None = None
    session_name: str | None = None

    @property
    def session_prefix(self) -> str:
        """AWS names sessions after the IAM user or the role session (``alice-0123456789abcdef0``)."""
        if self.type == "IAMUser" and self.user_name:
            return self.user_name
        if self.type == "AssumedRole" and self.session_name:
            return self.session_name
        return self.account_id

    @classmethod
    def from_arn(
        cls,
        arn: str,
        *,
        principal_id: str | None = None,
        access_key_id: str | None = None,
        role_session_name: str = "sandbox",
    ) -> CallerIdentity:
        """Identity of an IAM user, an assumed-role session, a role (assumed as ``role_session_name``)
        or the account root, from its ARN. Ids come from moto's IAM when the principal exists there."""
        parts = arn.split(":", 5)
        if len(parts) != 6 or parts[0] != "arn" or parts[2] not in ("iam", "sts") or not parts[4].isdigit():
            raise ValueError(f"not an IAM user, role or assumed-role ARN: {arn!r}")
        partition, account, resource = parts[1], parts[4], parts[5]
        if parts[2] == "sts" and resource == _MOTO_DEFAULT_USER:
            # the sandbox's credentials sign as the account root (as the local API's SigV4 says)
            arn, resource = f"arn:{partition}:iam::{account}:root", "root"
            principal_id = None
        if resource == "root":
            return cls("Root", arn, principal_id or account, account, access_key_id)
        kind, _, rest = resource.partition("/")
        if kind == "user" and rest:
            name = rest.rsplit("/", 1)[-1]
            user = iam_backends[account][partition].users.get(name)
            pid = principal_id or (user.id if user else _synthetic_id("AIDA", arn))
            return cls("IAMUser", arn, pid, account, access_key_id, user_name=name)
        if kind == "role" and rest:
            role_name = rest.rsplit("/", 1)[-1]
            assumed = f"arn:{partition}:sts::{account}:assumed-role/{role_name}/{role_session_name}"
            return cls._assumed_role(assumed, arn, principal_id, access_key_id)
        if kind == "assumed-role" and rest.count("/") == 1:
            role_name = rest.split("/", 1)[0]
            role_arn = f"arn:{partition}:iam::{account}:role/{role_name}"
            return cls._assumed_role(arn, role_arn, principal_id, access_key_id)
        raise ValueError(f"not an IAM user, role or assumed-role ARN: {arn!r}")

    @classmethod
    def _assumed_role(
        cls, arn: str, role_arn: str, principal_id: str | None, access_key_id: str | None
    ) -> CallerIdentity:
        account, partition = arn.split(":")[4], arn.split(":")[1]
        session_name = arn.rsplit("/", 1)[-1]
        role_name = role_arn.rsplit("/", 1)[-1]
        role = next((r for r in iam_backends[account][partition].get_roles() if r.name == role_name), None)
        if role is not None:
            role_arn = role.arn
        role_id = role.id if role is not None else _synthetic_id("AROA", role_arn)
        if principal_id and ":" in principal_id:
            role_id = principal_id.split(":", 1)[0]
        return cls(
            "AssumedRole",
            arn,
            f"{role_id}:{session_name}",
            account,
            access_key_id or _synthetic_id("ASIA", arn),
            role_arn=role_arn,
            role_id=role_id,
            session_name=session_name,
        )

    def cloudtrail_user_identity(self, at: datetime) -> dict[str, Any]:
        identity: dict[str, Any] = {
            "type": self.type,
            "principalId": self.principal_id,
            "arn": self.arn,
            "accountId": self.account_id,
        }
        if self.access_key_id:
            identity["accessKeyId"] = self.access_key_id
        if self.type == "IAMUser":
            identity["userName"] = self.user_name
        elif self.type == "AssumedRole":
            identity["sessionContext"] = {
                "sessionIssuer": {
                    "type": "Role",
                    "principalId": self.role_id,
                    "arn": self.role_arn,
                    "accountId": self.account_id,
                    "userName": (self.role_arn or "").rsplit("/", 1)[-1],
                },
                "webIdFederationData": {},
                "attributes": {"creationDate": _iso(at), "mfaAuthenticated": "false"},
            }
        return identity


def _synthetic_id(prefix: str, seed: str) -> str:
    """A stable IAM-style unique id (``AIDA`` + 17 characters) for a principal moto does not know."""
    digest = base64.b32encode(hashlib.sha256(seed.encode()).digest()).decode()
    return prefix + digest[:17]


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class SimulatedSession:
    """One session as the simulator holds it; :meth:`to_api` is DescribeSessions' ``Session``."""

    session_id: str
    target: str
    owner: str
    status: str
    start_date: datetime
    document_name: str
    access_type: str = "Standard"
    reason: str | None = None
    end_date: datetime | None = None
    max_session_duration: str | None = None
    parameters: dict[str, list[str]] = field(default_factory=dict)
    terminating_until: datetime | None = None  # Terminating: when it becomes Terminated

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "SessionId": self.session_id,
            "Target": self.target,
            "Status": self.status,
            "StartDate": self.start_date,
            "DocumentName": self.document_name,
            "Owner": self.owner,
            "AccessType": self.access_type,
        }
        if self.end_date is not None:
            out["EndDate"] = self.end_date
        if self.reason:
            out["Reason"] = self.reason
        if self.max_session_duration:
            out["MaxSessionDuration"] = self.max_session_duration
        return out


@dataclass
class _Fault:
    code: str
    message: str
    remaining: int


@dataclass(frozen=True)
class _PendingEvent:
    due: datetime
    event: dict[str, Any]  # bus.emit's keyword arguments


ConnectedTargets = Callable[[str, str], Iterable[str]]
"""(account, region) -> the SSM targets whose agent is connected there."""


class SsmSessionsSimulator:
    """Session Manager for one account and region of the sandbox.

    ``install()`` makes moto answer the three session operations from this object (``uninstall()``
    undoes it); the scenario helpers (:meth:`start_session_as`, :meth:`disconnect`, :meth:`fail`,
    :meth:`inject_fault`, ...) drive the same state directly.
    """

    def __init__(
        self,
        clock: SandboxClock,
        region: str = "us-east-1",
        account_id: str = DEFAULT_ACCOUNT_ID,
        *,
        connected_targets: ConnectedTargets | None = None,
        max_session_duration_minutes: int | None = None,
        cloudtrail_delay_seconds: float = 30.0,
        terminating_seconds: float = 5.0,
    ) -> None:
        if max_session_duration_minutes is not None and not 1 <= max_session_duration_minutes <= 1440:
            raise ValueError("max_session_duration_minutes must be 1-1440 (Session Manager's range)")
        if cloudtrail_delay_seconds < 0 or terminating_seconds < 0:
            raise ValueError("delays must be >= 0 simulated seconds")
        self.clock = clock
        self.region = region
        self.account_id = account_id
        self.connected_targets = connected_targets or hyperpod_node_targets
        self.max_session_duration_minutes = max_session_duration_minutes
        self.cloudtrail_delay_seconds = cloudtrail_delay_seconds
        self.terminating_seconds = terminating_seconds
        self._sessions: dict[str, SimulatedSession] = {}
        self._faults: dict[str, _Fault] = {}
        self._outbox: list[_PendingEvent] = []  # CloudTrail events not yet delivered, in due order
        self._spawned: list[SsmSessionsSimulator] = []  # other regions' simulators, made from this one
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------------
    def install(self) -> None:
        """Serve StartSession / DescribeSessions / TerminateSession for this account and region, and
        (through simulators spawned from this one) for every other region without one."""
        with _REGISTRY_LOCK:
            key = (self.account_id, self.region)
            other = _SIMULATORS.get(key)
            if other is not None and other is not self:
                raise RuntimeError(f"another SsmSessionsSimulator is installed for {key}")
            _SIMULATORS[key] = self
            _INSTALLED.append(self)
            _patch_moto_ssm_response(_HANDLERS)

    def uninstall(self) -> None:
        """Stop serving this (account, region) and the regions spawned from this simulator."""
        with _REGISTRY_LOCK:
            if self in _INSTALLED:
                _INSTALLED.remove(self)
            for simulator in (self, *self._spawned):
                if _SIMULATORS.get((simulator.account_id, simulator.region)) is simulator:
                    del _SIMULATORS[(simulator.account_id, simulator.region)]
            self._spawned.clear()
            if not _INSTALLED:
                _unpatch_moto_ssm_response()

    def spawn(self, account_id: str, region: str) -> SsmSessionsSimulator:
        """A simulator for another (account, region) with this one's clock and options; ticked by
        this one's :meth:`tick`."""
        simulator = SsmSessionsSimulator(
            self.clock,
            region,
            account_id,
            connected_targets=self.connected_targets,
            max_session_duration_minutes=self.max_session_duration_minutes,
            cloudtrail_delay_seconds=self.cloudtrail_delay_seconds,
            terminating_seconds=self.terminating_seconds,
        )
        self._spawned.append(simulator)
        return simulator

    def tick(self) -> None:
        """Advance to ``clock.now()``: finish terminations, end overdue sessions, deliver the
        CloudTrail events due (here and in the regions spawned from this simulator)."""
        for simulator in (self, *list(self._spawned)):
            simulator._advance()

    def __enter__(self) -> SsmSessionsSimulator:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- scenario / admin API --------------------------------------------------------------------
    def start_session_as(
        self,
        owner_arn: str,
        target: str,
        *,
        document_name: str | None = None,
        reason: str | None = None,
        parameters: Mapping[str, Sequence[str]] | None = None,
        role_session_name: str = "sandbox",
        source_ip_address: str = "198.51.100.23",
        user_agent: str = _DEFAULT_USER_AGENT,
    ) -> str:
        """Start a session as ``owner_arn`` (IAM user, role or assumed-role ARN) without going
        through a signed request; emits the CloudTrail event like the API path. Returns SessionId."""
        identity = CallerIdentity.from_arn(owner_arn, role_session_name=role_session_name)
        result = self.start_session(
            identity,
            target,
            document_name=document_name,
            reason=reason,
            parameters=parameters,
            source_ip_address=source_ip_address,
            user_agent=user_agent,
        )
        return str(result["SessionId"])

    def start_session(
        self,
        identity: CallerIdentity,
        target: str,
        *,
        document_name: str | None = None,
        reason: str | None = None,
        parameters: Mapping[str, Sequence[str]] | None = None,
        source_ip_address: str = "198.51.100.23",
        user_agent: str = _DEFAULT_USER_AGENT,
    ) -> dict[str, str]:
        """StartSession: the response ({SessionId, TokenValue, StreamUrl}); emits the CloudTrail event."""
        self._raise_injected("StartSession")
        problems = []
        if not target or len(target) > 400:
            problems.append(
                f"Value '{target}' at 'target' failed to satisfy constraint: Member must have length 1-400"
            )
        if reason is not None and not 1 <= len(reason) <= 256:
            problems.append(
                f"Value '{reason}' at 'reason' failed to satisfy constraint: Member must have length 1-256"
            )
        if problems:
            raise _constraint_error(problems)
        if document_name is not None:
            self._check_document(document_name)
        if target not in set(self.connected_targets(self.account_id, self.region)):
            raise SessionsError("TargetNotConnected", f"{target} is not connected.")

        now = self.clock.now()
        session_id = f"{identity.session_prefix}-{secrets.token_hex(9)[:17]}"
        session = SimulatedSession(
            session_id=session_id,
            target=target,
            owner=identity.arn,
            status="Connected",
            start_date=now,
            document_name=document_name or DEFAULT_DOCUMENT,
            reason=reason,
            max_session_duration=(
                str(self.max_session_duration_minutes) if self.max_session_duration_minutes else None
            ),
            parameters={k: list(v) for k, v in (parameters or {}).items()},
        )
        response = {
            "SessionId": session_id,
            "TokenValue": base64.b64encode(secrets.token_bytes(96)).decode(),
            "StreamUrl": (
                f"wss://ssmmessages.{self.region}.amazonaws.com/v1/data-channel/{session_id}"
                "?role=publish_subscribe"
            ),
        }
        event = self._cloudtrail_event(
            session,
            identity,
            response,
            requested_document=document_name,
            source_ip_address=source_ip_address,
            user_agent=user_agent,
        )
        with self._lock:
            self._sessions[session_id] = session
            self._outbox.append(_PendingEvent(now + timedelta(seconds=self.cloudtrail_delay_seconds), event))
        return response

    def describe_sessions(
        self,
        state: str,
        filters: Sequence[Mapping[str, str]] | None = None,
        max_results: int | None = None,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        """DescribeSessions: ``{"Sessions": [...], "NextToken"?: ...}`` (filters use the API's
        lower-case ``key`` / ``value``)."""
        self._raise_injected("DescribeSessions")
        self._validate_describe(state, filters, max_results)
        predicates = [self._filter_predicate(f["key"], f["value"]) for f in filters or []]
        wanted = ACTIVE_STATUSES if state == "Active" else HISTORY_STATUSES
        with self._lock:
            self._settle(self.clock.now())
            matching = [
                s
                for s in self._sessions.values()
                if s.status in wanted and all(predicate(s) for predicate in predicates)
            ]
        matching.sort(key=lambda s: (s.start_date, s.session_id), reverse=True)
        start = self._decode_token(next_token, state) if next_token else 0
        page_size = max_results or MAX_RESULTS_RANGE[1]
        page = matching[start : start + page_size]
        out: dict[str, Any] = {"Sessions": [s.to_api() for s in page]}
        if start + page_size < len(matching):
            out["NextToken"] = self._encode_token(start + page_size, state)
        return out

    def terminate_session(self, session_id: str) -> dict[str, str]:
        """TerminateSession: the session goes ``Terminating`` (still Active), then ``Terminated``
        (History) ``terminating_seconds`` later; echoes the id."""
        self._raise_injected("TerminateSession")
        if not session_id or len(session_id) > 96:
            raise _constraint_error(
                [
                    f"Value '{session_id}' at 'sessionId' failed to satisfy constraint: "
                    "Member must have length 1-96"
                ]
            )
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.active and session.status != "Terminating":
                session.status = "Terminating"
                session.terminating_until = self.clock.now() + timedelta(seconds=self.terminating_seconds)
        return {"SessionId": session_id}

    def disconnect(self, session_id: str) -> None:
        """Fault: the client dropped (the session stays Active as ``Disconnected``)."""
        with self._lock:
            session = self._get(session_id)
            if session.active:
                session.status = "Disconnected"

    def fail(self, session_id: str) -> None:
        """Fault: the session failed (→ History as ``Failed``)."""
        self._get(session_id)
        self._end(session_id, "Failed")

    def sessions(self, state: Literal["Active", "History"] | None = None) -> list[SimulatedSession]:
        """A snapshot of the sessions (copies), oldest first."""
        with self._lock:
            self._settle(self.clock.now())
            chosen = [
                replace(s)
                for s in self._sessions.values()
                if state is None or (s.active if state == "Active" else not s.active)
            ]
        return sorted(chosen, key=lambda s: s.start_date)

    def active_sessions_of(self, owner_arn: str) -> list[SimulatedSession]:
        return [s for s in self.sessions("Active") if s.owner == owner_arn]

    def inject_fault(self, operation: str, code: str, message: str, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (StartSession, DescribeSessions,
        TerminateSession) fail with ``code`` (e.g. ThrottlingException, InternalServerError)."""
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS}, not {operation!r}")
        if times < 1:
            raise ValueError("times must be >= 1")
        with self._lock:
            self._faults[operation] = _Fault(code, message, times)

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def reset(self) -> None:
        """Forget every session, undelivered event and fault (between scenarios)."""
        with self._lock:
            self._sessions.clear()
            self._faults.clear()
            self._outbox.clear()

    # -- internals -------------------------------------------------------------------------------
    def _get(self, session_id: str) -> SimulatedSession:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise KeyError(f"no session {session_id!r} in the SSM sessions simulator") from None

    def _end(self, session_id: str, status: str) -> None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None and session.active:
                session.status = status
                session.end_date = self.clock.now()
                session.terminating_until = None

    def _settle(self, now: datetime) -> None:
        """Sessions as they stand at ``now``: terminations finished, overdue sessions ended."""
        limit = (
            timedelta(minutes=self.max_session_duration_minutes)
            if self.max_session_duration_minutes is not None
            else None
        )
        for session in self._sessions.values():
            if session.terminating_until is not None and session.terminating_until <= now:
                session.status, session.end_date = "Terminated", session.terminating_until
                session.terminating_until = None
            elif limit is not None and session.active and now - session.start_date >= limit:
                session.status, session.end_date = "Terminated", session.start_date + limit
                session.terminating_until = None

    def _advance(self) -> None:
        now = self.clock.now()
        with self._lock:
            self._settle(now)
            due = [pending for pending in self._outbox if pending.due <= now]
            self._outbox = [pending for pending in self._outbox if pending.due > now]
        # Outside the lock: a rule target may run SessionGuard in this thread, which calls back in.
        for pending in due:
            bus.emit(**pending.event)

    def _raise_injected(self, operation: str) -> None:
        with self._lock:
            fault = self._faults.get(operation)
            if fault is None:
                return
            fault.remaining -= 1
            if fault.remaining <= 0:
                del self._faults[operation]
        raise SessionsError(fault.code, fault.message)

    def _check_document(self, name: str) -> None:
        if name in AWS_SESSION_DOCUMENTS:
            return
        try:
            ssm_backends[self.account_id][self.region].describe_document(name, "", "")
        except InvalidDocument:
            raise SessionsError(
                "InvalidDocument", f"Document {name} does not exist in your account."
            ) from None

    @staticmethod
    def _validate_describe(
        state: str, filters: Sequence[Mapping[str, str]] | None, max_results: int | None
    ) -> None:
        problems = []
        if state not in ("Active", "History"):
            problems.append(
                f"Value '{state}' at 'state' failed to satisfy constraint: "
                "Member must satisfy enum value set: [Active, History]"
            )
        if max_results is not None:
            low, high = MAX_RESULTS_RANGE
            if max_results > high:
                problems.append(
                    f"Value '{max_results}' at 'maxResults' failed to satisfy constraint: "
                    f"Member must have value less than or equal to {high}"
                )
            elif max_results < low:
                problems.append(
                    f"Value '{max_results}' at 'maxResults' failed to satisfy constraint: "
                    f"Member must have value greater than or equal to {low}"
                )
        if filters is not None:
            if len(filters) > MAX_FILTERS:
                shown = ", ".join(
                    f"SessionFilter(key={f.get('key')}, value={f.get('value')})" for f in filters
                )
                problems.append(
                    f"Value '[{shown}]' at 'filters' failed to satisfy constraint: "
                    f"Member must have length less than or equal to {MAX_FILTERS}"
                )
            elif not filters:
                problems.append(
                    "Value '[]' at 'filters' failed to satisfy constraint: "
                    "Member must have length greater than or equal to 1"
                )
            for index, f in enumerate(filters, start=1):
                if f.get("key") not in FILTER_KEYS:
                    problems.append(
                        f"Value '{f.get('key')}' at 'filters.{index}.member.key' failed to satisfy "
                        f"constraint: Member must satisfy enum value set: [{', '.join(FILTER_KEYS)}]"
                    )
                value = f.get("value")
                if not value or len(value) > 400:
                    problems.append(
                        f"Value '{value}' at 'filters.{index}.member.value' failed to satisfy "
                        "constraint: Member must have length between 1 and 400"
                    )
        if problems:
            raise _constraint_error(problems)

    @staticmethod
    def _filter_predicate(key: str, value: str) -> Callable[[SimulatedSession], bool]:
        if key in ("InvokedAfter", "InvokedBefore"):
            try:
                at = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise SessionsError(
                    "ValidationException",
                    f"Invalid value for filter {key}: {value} is not a valid timestamp.",
                ) from None
            if at.tzinfo is None:
                raise SessionsError(
                    "ValidationException", f"Invalid value for filter {key}: {value} has no time zone."
                )
            if key == "InvokedAfter":
                return lambda s: s.start_date >= at
            return lambda s: s.start_date < at
        if key == "Status" and value not in SESSION_STATUSES:
            raise SessionsError(
                "ValidationException",
                f"Invalid value for filter Status: {value}. Valid values: {', '.join(SESSION_STATUSES)}",
            )
        if key == "AccessType" and value not in ACCESS_TYPES:
            raise SessionsError(
                "ValidationException",
                f"Invalid value for filter AccessType: {value}. Valid values: {', '.join(ACCESS_TYPES)}",
            )
        attribute = {
            "Target": "target",
            "Owner": "owner",
            "Status": "status",
            "SessionId": "session_id",
            "AccessType": "access_type",
        }[key]
        return lambda s: bool(getattr(s, attribute) == value)

    def _encode_token(self, offset: int, state: str) -> str:
        raw = json.dumps({"o": offset, "s": state, "a": self.account_id}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_token(self, token: str, state: str) -> int:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            offset = decoded["o"]
            if decoded["s"] != state or decoded["a"] != self.account_id or not isinstance(offset, int):
                raise ValueError(token)
        except (ValueError, KeyError, TypeError):
            raise SessionsError("InvalidNextToken", "The specified token isn't valid.") from None
        return offset

    def _cloudtrail_event(
        self,
        session: SimulatedSession,
        identity: CallerIdentity,
        response: Mapping[str, str],
        *,
        requested_document: str | None,
        source_ip_address: str,
        user_agent: str,
    ) -> dict[str, Any]:
        """``bus.emit``'s arguments for the StartSession record a trail would deliver."""
        request_parameters: dict[str, Any] = {"target": session.target}
        if requested_document is not None:
            request_parameters["documentName"] = requested_document
        if session.reason:
            request_parameters["reason"] = session.reason
        if session.parameters:
            request_parameters["parameters"] = session.parameters
        detail = {
            "eventVersion": "1.08",
            "userIdentity": identity.cloudtrail_user_identity(session.start_date),
            "eventTime": _iso(session.start_date),
            "eventSource": "ssm.amazonaws.com",
            "eventName": "StartSession",
            "awsRegion": self.region,
            "sourceIPAddress": source_ip_address,
            "userAgent": user_agent,
            "requestParameters": request_parameters,
            "responseElements": {
                "sessionId": response["SessionId"],
                "tokenValue": _CLOUDTRAIL_TOKEN_REDACTED,
                "streamUrl": response["StreamUrl"],
            },
            "requestID": str(uuid.uuid4()),
            "eventID": str(uuid.uuid4()),
            "readOnly": False,
            "eventType": "AwsApiCall",
            "managementEvent": True,
            "recipientAccountId": self.account_id,
            "eventCategory": "Management",
        }
        return {
            "source": "aws.ssm",
            "detail_type": "AWS API Call via CloudTrail",
            "detail": detail,
            "region": self.region,
            "account_id": self.account_id,
            "time": session.start_date,
        }


# -- the moto seam -------------------------------------------------------------------------------
_SIMULATORS: dict[tuple[str, str], SsmSessionsSimulator] = {}  # installed and spawned, by (account, region)
_INSTALLED: list[SsmSessionsSimulator] = []  # in installation order: the first spawns the others
_REGISTRY_LOCK = threading.Lock()

ResponseHandler = Callable[[SimpleSystemManagerResponse], ActionResult]


def simulator_for(account_id: str, region: str) -> SsmSessionsSimulator | None:
    """The simulator serving (account, region), spawned on first use; None while none is installed."""
    key = (account_id, region)
    with _REGISTRY_LOCK:
        simulator = _SIMULATORS.get(key)
        if simulator is None and _INSTALLED:
            simulator = _SIMULATORS[key] = _INSTALLED[0].spawn(account_id, region)
        return simulator


def _simulator_for(response: SimpleSystemManagerResponse) -> SsmSessionsSimulator:
    simulator = simulator_for(response.current_account, response.region)
    if simulator is None:  # the seam is installed only while a simulator is
        raise SessionsError("InternalServerError", "the sandbox SSM sessions simulator is not installed")
    return simulator


def hyperpod_node_targets(account_id: str, region: str) -> list[str]:
    """The SSM targets of the HyperPod nodes of (account, region) whose agent is reachable:
    ``sagemaker-cluster:<cluster-id>_<instance-group>-<instance-id>``, for ``Running`` nodes only (a
    node that is rebooting or in deep health checks is billed but its agent is not connected)."""
    return [
        f"sagemaker-cluster:{instance.cluster_arn.rsplit('/', 1)[-1]}_{instance.instance_group}-"
        f"{instance.instance_id}"
        for simulator in HyperPodSimulator.every_region()
        if (simulator.account_id, simulator.region) == (account_id, region)
        for instance in simulator.running_instances()
        if instance.status == "Running"
    ]


def _caller_identity(response: SimpleSystemManagerResponse) -> CallerIdentity:
    """The caller as moto resolves it for sts:GetCallerIdentity (IAM user / assumed role / default)."""
    access_key = response.get_access_key()
    sts = sts_backends[response.current_account][response.partition]
    user_id, arn, _ = sts.get_caller_identity(access_key, response.region)
    return CallerIdentity.from_arn(arn, principal_id=user_id, access_key_id=access_key)


def _handle_start_session(response: SimpleSystemManagerResponse) -> ActionResult:
    simulator = _simulator_for(response)
    result = simulator.start_session(
        _caller_identity(response),
        response._get_param("Target"),
        document_name=response._get_param("DocumentName"),
        reason=response._get_param("Reason"),
        parameters=response._get_param("Parameters"),
        source_ip_address="127.0.0.1",  # every sandbox caller is on loopback
        user_agent=str(response.headers.get("User-Agent", _DEFAULT_USER_AGENT)),
    )
    return ActionResult(result)


def _handle_describe_sessions(response: SimpleSystemManagerResponse) -> ActionResult:
    max_results = response._get_param("MaxResults")
    result = _simulator_for(response).describe_sessions(
        state=response._get_param("State"),
        filters=response._get_param("Filters"),
        max_results=int(max_results) if max_results is not None else None,
        next_token=response._get_param("NextToken"),
    )
    return ActionResult(result)


def _handle_terminate_session(response: SimpleSystemManagerResponse) -> ActionResult:
    return ActionResult(_simulator_for(response).terminate_session(response._get_param("SessionId")))


_HANDLERS: dict[str, ResponseHandler] = {
    "start_session": _handle_start_session,
    "describe_sessions": _handle_describe_sessions,
    "terminate_session": _handle_terminate_session,
}


def _patch_moto_ssm_response(handlers: Mapping[str, ResponseHandler]) -> None:
    """THE seam: moto's ``BaseResponse.call_action`` turns the X-Amz-Target action into a snake_case
    method name and calls that method of ``SimpleSystemManagerResponse`` if the class has it, then
    serializes an ``ActionResult`` with botocore's ssm model. Adding the three methods to the class
    is all it takes, in-process and in moto's server. Guarded by tests/sandbox/test_ssm_sessions.py."""
    for name, handler in handlers.items():
        existing = SimpleSystemManagerResponse.__dict__.get(name)
        if existing is not None and existing is not handler:
            raise RuntimeError(
                f"moto's SimpleSystemManagerResponse already defines {name}: the SSM seam has moved "
                "(moto now implements sessions?); revisit sandbox/ssm_sessions.py"
            )
        setattr(SimpleSystemManagerResponse, name, handler)


def _unpatch_moto_ssm_response() -> None:
    for name, handler in _HANDLERS.items():
        if SimpleSystemManagerResponse.__dict__.get(name) is handler:
            delattr(SimpleSystemManagerResponse, name)
