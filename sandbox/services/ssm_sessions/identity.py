"""Who calls StartSession: the caller's identity resolved from moto's IAM and STS, the SessionId
prefix AWS derives from it, and its CloudTrail userIdentity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from moto.iam.models import iam_backends

from sandbox.services.ssm_sessions.model import MOTO_DEFAULT_USER, iso, synthetic_id


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
        if parts[2] == "sts" and resource == MOTO_DEFAULT_USER:
            # the sandbox's credentials sign as the account root (as the local API's SigV4 says)
            arn, resource = f"arn:{partition}:iam::{account}:root", "root"
            principal_id = None
        if resource == "root":
            return cls("Root", arn, principal_id or account, account, access_key_id)
        kind, _, rest = resource.partition("/")
        if kind == "user" and rest:
            name = rest.rsplit("/", 1)[-1]
            user = iam_backends[account][partition].users.get(name)
            pid = principal_id or (user.id if user else synthetic_id("AIDA", arn))
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
        role_id = role.id if role is not None else synthetic_id("AROA", role_arn)
        if principal_id and ":" in principal_id:
            role_id = principal_id.split(":", 1)[0]
        return cls(
            "AssumedRole",
            arn,
            f"{role_id}:{session_name}",
            account,
            access_key_id or synthetic_id("ASIA", arn),
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
                "attributes": {"creationDate": iso(at), "mfaAuthenticated": "false"},
            }
        return identity
