"""The SSM sessions simulator's vocabulary: Session Manager's limits, statuses and filters, the
error it answers with, and a simulated session as DescribeSessions shows it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from moto.core.exceptions import ServiceException

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

CLOUDTRAIL_TOKEN_REDACTED = "Value hidden due to security reasons."  # noqa: S105 - CloudTrail's text
MOTO_DEFAULT_USER = "user/moto"  # moto's caller for keys it does not know: the sandbox's own
DEFAULT_USER_AGENT = (
    "aws-cli/2.17.0 md/awscrt#0.20.11 ua/2.0 os/linux md/arch#x86_64 command/ssm.start-session"
)


class SessionsError(ServiceException):
    """An SSM error as the API returns it (code + message); also raised by the scenario helpers."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


def constraint_error(problems: Sequence[str]) -> SessionsError:
    """AWS's request-validation wording: ``N validation error(s) detected: ...; ...``."""
    noun = "error" if len(problems) == 1 else "errors"
    return SessionsError(
        "ValidationException", f"{len(problems)} validation {noun} detected: " + "; ".join(problems)
    )


def synthetic_id(prefix: str, seed: str) -> str:
    """A stable IAM-style unique id (``AIDA`` + 17 characters) for a principal moto does not know."""
    digest = base64.b32encode(hashlib.sha256(seed.encode()).digest()).decode()
    return prefix + digest[:17]


def iso(at: datetime) -> str:
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
class Fault:
    code: str
    message: str
    remaining: int


@dataclass(frozen=True)
class PendingEvent:
    due: datetime
    event: dict[str, Any]  # bus.emit's keyword arguments


ConnectedTargets = Callable[[str, str], Iterable[str]]
"""(account, region) -> the SSM targets whose agent is connected there."""
