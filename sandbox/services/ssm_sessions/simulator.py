"""``SsmSessionsSimulator``: StartSession / DescribeSessions / TerminateSession for one (account,
region) on the sandbox clock, with injectable faults and the CloudTrail StartSession event.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Literal

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ssm.exceptions import InvalidDocument
from moto.ssm.models import ssm_backends

from sandbox.emulator import bus
from sandbox.emulator.clock import SandboxClock
from sandbox.services.ssm_sessions.identity import CallerIdentity
from sandbox.services.ssm_sessions.model import (
    ACCESS_TYPES,
    ACTIVE_STATUSES,
    AWS_SESSION_DOCUMENTS,
    CLOUDTRAIL_TOKEN_REDACTED,
    DEFAULT_DOCUMENT,
    DEFAULT_USER_AGENT,
    FILTER_KEYS,
    HISTORY_STATUSES,
    MAX_FILTERS,
    MAX_RESULTS_RANGE,
    OPERATIONS,
    SESSION_STATUSES,
    ConnectedTargets,
    Fault,
    PendingEvent,
    SessionsError,
    SimulatedSession,
    constraint_error,
    iso,
)
from sandbox.services.ssm_sessions.seam import (
    HANDLERS,
    INSTALLED,
    REGISTRY_LOCK,
    SIMULATORS,
    hyperpod_node_targets,
    patch_moto_ssm_response,
    unpatch_moto_ssm_response,
)


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
        self._faults: dict[str, Fault] = {}
        self._outbox: list[PendingEvent] = []  # CloudTrail events not yet delivered, in due order
        self._spawned: list[SsmSessionsSimulator] = []  # other regions' simulators, made from this one
        self._lock = threading.RLock()

    # -- lifecycle -------------------------------------------------------------------------------
    def install(self) -> None:
        """Serve StartSession / DescribeSessions / TerminateSession for this account and region, and
        (through simulators spawned from this one) for every other region without one."""
        with REGISTRY_LOCK:
            key = (self.account_id, self.region)
            other = SIMULATORS.get(key)
            if other is not None and other is not self:
                raise RuntimeError(f"another SsmSessionsSimulator is installed for {key}")
            SIMULATORS[key] = self
            INSTALLED.append(self)
            patch_moto_ssm_response(HANDLERS)

    def uninstall(self) -> None:
        """Stop serving this (account, region) and the regions spawned from this simulator."""
        with REGISTRY_LOCK:
            if self in INSTALLED:
                INSTALLED.remove(self)
            for simulator in (self, *self._spawned):
                if SIMULATORS.get((simulator.account_id, simulator.region)) is simulator:
                    del SIMULATORS[(simulator.account_id, simulator.region)]
            self._spawned.clear()
            if not INSTALLED:
                unpatch_moto_ssm_response()

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
        user_agent: str = DEFAULT_USER_AGENT,
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
        user_agent: str = DEFAULT_USER_AGENT,
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
            raise constraint_error(problems)
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
            self._outbox.append(PendingEvent(now + timedelta(seconds=self.cloudtrail_delay_seconds), event))
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
            raise constraint_error(
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
            self._faults[operation] = Fault(code, message, times)

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
            raise constraint_error(problems)

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
            "eventTime": iso(session.start_date),
            "eventSource": "ssm.amazonaws.com",
            "eventName": "StartSession",
            "awsRegion": self.region,
            "sourceIPAddress": source_ip_address,
            "userAgent": user_agent,
            "requestParameters": request_parameters,
            "responseElements": {
                "sessionId": response["SessionId"],
                "tokenValue": CLOUDTRAIL_TOKEN_REDACTED,
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
