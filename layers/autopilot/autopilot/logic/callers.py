"""Who an API caller is, as far as AWS vouches for it: the identity ownership is decided on.

API Gateway's IAM authorization hands the function one trustworthy string, the signer's ARN
(``requestContext.identity.userArn``); nothing else it carries (``caller``, ``user``: the role's
unique id and the same session name) says more, and ``sts:SourceIdentity`` is not in the event at all.
What that ARN proves:

- an IAM user ``arn:aws:iam::A:user/alice``: that user;
- an IAM Identity Center session ``arn:aws:sts::A:assumed-role/AWSReservedSSO_<PermissionSet>_<hex>/
  alice``: that person. Identity Center sets the session name to the user's name, and the role's trust
  policy admits only Identity Center's SAML provider and cannot be edited by the account. A role a
  customer names ``AWSReservedSSO_...`` elsewhere gains nothing: its sessions are only held to their
  own names, and no other role can carry the real role's name (role names are unique in an account);
- any other role session: its role, because ``sts:AssumeRole``'s caller chooses the session name.
  ``OwnerMatching=session`` (stack parameter) holds those sessions to their names too, for an account
  whose trust policies pin the name (``sts:RoleSessionName``, a SAML IdP): docs/security.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

OwnerMatching = Literal["role", "session"]

# Identity Center's roles; their path (/aws-reserved/sso.amazonaws.com/) is not in a session's ARN.
IDENTITY_CENTER_ROLE_PREFIX = "AWSReservedSSO_"

_SESSION = re.compile(
    r"arn:(?P<partition>[^:]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/(?P<session>.+)"
)
_ROLE = re.compile(r"arn:(?P<partition>[^:]+):iam::(?P<account>\d{12}):role/(?:.*/)?(?P<role>[^/]+)")


def principal(arn: str) -> str:
    """The IAM principal an identity ARN acts as: a role for its sessions and its ARN with a path
    (an assumed-role ARN carries no path), else the ARN itself."""
    match = _SESSION.fullmatch(arn) or _ROLE.fullmatch(arn)
    if match is None:
        return arn
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"


def is_identity_center_session(arn: str) -> bool:
    match = _SESSION.fullmatch(arn)
    return match is not None and match["role"].startswith(IDENTITY_CENTER_ROLE_PREFIX)


def person(arn: str, *, matching: OwnerMatching = "role") -> str:
    """The identity ``arn`` proves: the session for an Identity Center session (and for every role
    session under ``matching="session"``), else ``principal(arn)``."""
    if (matching == "session" and _SESSION.fullmatch(arn)) or is_identity_center_session(arn):
        return arn
    return principal(arn)


def acts_as(caller: str, listed: str, *, matching: OwnerMatching = "role") -> bool:
    """Whether ``caller`` is the identity ``listed`` names (a creator, an owner, an admin). A role ARN
    names every session of the role (Identity Center's: every user of the permission set); any other
    ARN names what it proves (``person``)."""
    if _ROLE.fullmatch(listed):
        return principal(caller) == principal(listed)
    return person(caller, matching=matching) == person(listed, matching=matching)


def acts_as_any(caller: str | None, listed: Iterable[str], *, matching: OwnerMatching = "role") -> bool:
    return caller is not None and any(acts_as(caller, arn, matching=matching) for arn in listed)
