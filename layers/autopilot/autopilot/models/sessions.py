"""SSM sessions as SessionGuard sees them: HyperPod targets, the CloudTrail StartSession event, and the
record of a session it terminated (a ``SESSION#`` item of the state table)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from autopilot.models.envelopes import EventBridgeModel
from autopilot.models.records import Time

HYPERPOD_TARGET_PREFIX = "sagemaker-cluster:"
RUN_AS_TAG = "SSMSessionRunAs"
MAX_SESSIONS_TAG = "autopilot:max-sessions"


def hyperpod_cluster_id(target: str) -> str | None:
    """The cluster id of a HyperPod node's SSM target (``sagemaker-cluster:<id>_<group>-<instance>``),
    None for any other target. Cluster ids and instance group names hold no ``_``, so the first one
    ends the id."""
    if not target.startswith(HYPERPOD_TARGET_PREFIX):
        return None
    cluster_id, separator, node = target.removeprefix(HYPERPOD_TARGET_PREFIX).partition("_")
    return cluster_id if cluster_id and separator and node else None


class TerminationReason(StrEnum):
    OVER_LIMIT = "over-limit"
    RUN_AS_MISSING = "run-as-missing"  # no SSMSessionRunAs tag: Session Manager would not map the user
    RUN_AS_FORBIDDEN = "run-as-forbidden"  # mapped to a user ForbiddenRunAsUsers names (root, ssm-user)


Trigger = Literal["event", "schedule"]


class ActiveSession(BaseModel):
    """One of DescribeSessions' ``Sessions`` (State Active)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    SessionId: str
    Target: str
    Owner: str
    Status: str
    StartDate: datetime


class _CamelModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class _UserIdentity(_CamelModel):
    arn: str | None = None


class _StartSessionRequest(_CamelModel):
    target: str


class _StartSessionResponse(_CamelModel):
    session_id: str


class StartSessionCall(_CamelModel):
    """The ``detail`` of CloudTrail's StartSession record; a refused call has an ``errorCode`` and no
    ``responseElements``."""

    event_name: Literal["StartSession"]
    user_identity: _UserIdentity
    request_parameters: _StartSessionRequest | None = None
    response_elements: _StartSessionResponse | None = None
    error_code: str | None = None

    @property
    def started(self) -> tuple[str, str, str] | None:
        """(principal ARN, target, session id) of a session that started, else None."""
        if self.error_code or not (
            self.user_identity.arn and self.request_parameters and self.response_elements
        ):
            return None
        return self.user_identity.arn, self.request_parameters.target, self.response_elements.session_id


class StartSessionEvent(EventBridgeModel):
    detail: StartSessionCall


class _SessionTag(BaseModel):
    """One of AssumeRole's ``Tags`` as CloudTrail records them (``{"key": ..., "value": ...}``)."""

    model_config = ConfigDict(defer_build=True)

    key: str
    value: str = ""


class _AssumeRoleRequest(_CamelModel):
    tags: list[_SessionTag] | None = None  # AssumeRole
    principal_tags: dict[str, str] | None = None  # AssumeRoleWithSAML / WithWebIdentity (the IdP's)
    incoming_transitive_tags: dict[str, str] | None = None  # role chaining: the previous session's


class _AssumedRoleUser(_CamelModel):
    arn: str


class _Credentials(_CamelModel):
    expiration: str | None = None


class _AssumeRoleResponse(_CamelModel):
    assumed_role_user: _AssumedRoleUser
    credentials: _Credentials | None = None


class AssumeRoleCall(_CamelModel):
    """The ``detail`` of CloudTrail's AssumeRole / AssumeRoleWithSAML / AssumeRoleWithWebIdentity record:
    the session it made and the session tags it was given (StartSession's record does not carry them)."""

    event_source: Literal["sts.amazonaws.com"]
    event_name: Literal["AssumeRole", "AssumeRoleWithSAML", "AssumeRoleWithWebIdentity"]
    request_parameters: _AssumeRoleRequest | None = None
    response_elements: _AssumeRoleResponse | None = None
    error_code: str | None = None

    @property
    def session_tags(self) -> dict[str, str]:
        request = self.request_parameters or _AssumeRoleRequest()
        return (
            (request.incoming_transitive_tags or {})
            | {tag.key: tag.value for tag in request.tags or []}
            | (request.principal_tags or {})
        )

    @property
    def run_as(self) -> tuple[str, str, str | None] | None:
        """(session ARN, its ``SSMSessionRunAs`` session tag, when the credentials expire) of a call that
        made a session with that tag, else None."""
        tag = self.session_tags.get(RUN_AS_TAG)
        if self.error_code or self.response_elements is None or tag is None:
            return None
        expiration = (
            self.response_elements.credentials.expiration if self.response_elements.credentials else None
        )
        return self.response_elements.assumed_role_user.arn, tag, expiration


class AssumeRoleEvent(EventBridgeModel):
    detail: AssumeRoleCall


class SessionTermination(_CamelModel):
    """A session SessionGuard terminated: who, which session, where, why (item ``SESSION#<id>`` under
    the cluster). ``claimedAt`` is written when the guard claims the session, ``terminatedAt`` once
    TerminateSession answered."""

    cluster_name: str
    session_id: str
    target: str
    principal: str
    reason: TerminationReason
    trigger: Trigger
    session_started_at: Time
    claimed_at: Time
    limit: int | None = None  # over-limit: the principal's limit on this cluster
    run_as: str | None = None  # run-as-forbidden: the user the principal is mapped to
    terminated_at: Time | None = None
