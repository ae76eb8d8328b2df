"""Who may call an AWS_IAM route: the caller's own IAM policies, evaluated as API Gateway has IAM do it.

API Gateway lets a SigV4-verified caller through only if its identity policies allow
``execute-api:Invoke`` on ``arn:aws:execute-api:<region>:<account>:<api-id>/<stage>/<METHOD>/<path>``
and none denies it; else 403 ``AccessDeniedException``. SAM's AWS_IAM integrations run the function
with the caller's credentials (``arn:aws:iam::*:user/*``), so Lambda then wants the caller's own
``lambda:InvokeFunction`` on the function too (the function's resource policy names API Gateway, not
the caller); without it API Gateway answers 500 (its log: "Invalid permissions on Lambda function").

Callers: the account root (the sandbox's own keys) is allowed everything, as on AWS; an IAM user is
its inline, attached and group policies; an AssumeRole session its role's policies, within the role's
permissions boundary and the session policy passed to AssumeRole. Evaluation is
sandbox.emulator.aws_calls.policy's (explicit Deny wins, conditions it cannot evaluate raise
UnsupportedPolicy). The stack's API has no resource policy (tests/sandbox/test_api_authorization.py checks the
template),
so identity policies alone decide, as for any same-account caller of an API without one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.sts.models import sts_backends

from sandbox.emulator.aws_calls.iam import boundary_document, role_documents
from sandbox.emulator.aws_calls.policy import Decision, Request, evaluate
from sandbox.emulator.sigv4 import Caller

INVOKE: Final = "execute-api:Invoke"


def invoke_arn(api: str, stage: str, method: str, path: str) -> str:
    """The execute-api ARN API Gateway authorizes (``api``: ``<region>:<account>:<api-id>``): the
    request's path as sent, without the stage."""
    return f"arn:aws:execute-api:{api}/{stage}/{method}/{path.lstrip('/')}"


def masked(arn: str) -> str:
    """The ARN as API Gateway prints it in a denial: the account id masked but for its last 4 digits."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and len(parts[4]) == 12:
        parts[4] = "********" + parts[4][-4:]
    return ":".join(parts)


def _documents(text: Any) -> dict[str, Any]:
    return json.loads(unquote(text)) if isinstance(text, str) else dict(text)


def _managed(policy: Any) -> dict[str, Any]:
    default = next(version for version in policy.versions if version.is_default)
    return _documents(default.document)


def _user_policies(account: str, name: str) -> list[dict[str, Any]]:
    backend = iam_backends[account]["aws"]
    try:
        user = backend.get_user(name)
    except NotFoundException:  # a deleted user's key allows nothing
        return []
    documents = [_documents(text) for text in user.policies.values()]
    documents += [_managed(policy) for policy in user.managed_policies.values()]
    for group in backend.get_groups_for_user(name):
        documents += [_documents(text) for text in group.policies.values()]
        documents += [_managed(policy) for policy in group.managed_policies.values()]
    return documents


def _session_policy(account: str, access_key: str) -> dict[str, Any] | None:
    for sts in sts_backends[account].values():
        for session in sts.assumed_roles:
            if session.access_key_id == access_key and session.policy:
                return _documents(session.policy)
    return None


class Authorizer:
    """The decisions for one caller, its policies read once (from moto's IAM, as they are now)."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        account = caller.account_id
        self.root = caller.user_arn == f"arn:aws:iam::{account}:root"
        self.principal_arn = caller.user_arn
        self.documents: list[dict[str, Any]] = []
        # each further set must allow too (permissions boundary, session policy)
        self.limits: list[dict[str, Any]] = []
        if self.root:
            return
        kind, _, name = caller.user_arn.split(":", 5)[5].partition("/")
        if kind == "user":
            self.documents = _user_policies(account, name.rsplit("/", 1)[-1])
        elif kind == "assumed-role":
            role_name = name.split("/", 1)[0]
            try:
                role_arn = str(iam_backends[account]["aws"].get_role(role_name).arn)
            except (NotFoundException, KeyError):  # a deleted role's session allows nothing
                return
            self.principal_arn = role_arn
            self.documents = role_documents(role_arn)
            boundary = boundary_document(role_arn)
            session = _session_policy(account, caller.access_key)
            self.limits = [d for d in (boundary, session) if d is not None]

    def decide(self, action: str, resource: str, region: str) -> Decision:
        if self.root:
            return Decision.ALLOWED
        context: Mapping[str, list[str]] = {
            "aws:PrincipalArn": [self.principal_arn],
            "aws:PrincipalAccount": [self.caller.account_id],
            "aws:RequestedRegion": [region],
        }
        request = Request(action, resource, context)
        decision = evaluate(self.documents, request)
        for limit in self.limits:
            if decision is not Decision.ALLOWED:
                break
            decision = evaluate([limit], request)
        return decision

    def invoke_denied(self, resource: str, region: str) -> str | None:
        """API Gateway's message when ``execute-api:Invoke`` on ``resource`` is denied, else None."""
        decision = self.decide(INVOKE, resource, region)
        if decision is Decision.ALLOWED:
            return None
        user = self.caller.user_arn
        message = f"User: {user} is not authorized to perform: {INVOKE} on resource: {masked(resource)}"
        return message + (" with an explicit deny" if decision is Decision.EXPLICIT_DENY else "")
