"""Resource policies (SQS queue policies, SNS topic policies) on the calls and deliveries that reach
them: an explicit Deny refuses even a principal of the account whose own policies allow the call.

What is evaluated (docs/sandbox.md, "IAM"):
- a principal's ``sqs:SendMessage`` / ``sqs:SendMessageBatch`` / ``sns:Publish``: the Deny statements
  of the queue's or topic's policy whose Principal matches it (``"*"``, its account, its role ARN or
  its session ARN), with ``aws:PrincipalArn`` / ``aws:PrincipalAccount`` in the context and no
  ``aws:SourceArn`` / ``aws:SourceAccount`` (a direct call has none). The principal's identity policy
  must allow the call as well: the sandbox never lets a resource policy's Allow stand in for it
  (AWS does in some same-account cases, so the sandbox is at most stricter there);
- an EventBridge delivery to an SQS target: the queue policy must Allow ``events.amazonaws.com`` and
  not Deny it, with ``aws:SourceArn`` = the rule's ARN and ``aws:SourceAccount`` = its account, as
  EventBridge delivers; a refused delivery goes to the target's DLQ, as a failed delivery does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from sandbox.emulator.aws_calls.policy import Decision, Request, UnsupportedPolicy, statement_applies

# (service, operation) whose resource's policy is evaluated on a principal's call.
GUARDED: Final = frozenset({("sqs", "SendMessage"), ("sqs", "SendMessageBatch"), ("sns", "Publish")})


@dataclass(frozen=True)
class Caller:
    """Who a resource policy is evaluated for: an IAM principal (its account, role or user ARN and,
    for a role, its session ARN) or an AWS service principal (``events.amazonaws.com``)."""

    account: str | None = None
    arns: tuple[str, ...] = ()
    service: str | None = None


def resource_policy(arn: str) -> dict[str, Any] | None:
    """The policy of the queue or topic ``arn`` as moto holds it; None when it has none (or no such
    resource: the call itself then fails as the service answers it)."""
    _, _, service, region, account, name = arn.split(":", 5)
    if service == "sqs":
        queue = sqs_backends[account][region].queues.get(name)
        text = queue.policy if queue is not None else None
        return json.loads(text) if text else None
    if service == "sns":
        topic = sns_backends[account][region].topics.get(arn)
        return json.loads(topic.policy) if topic is not None else None
    return None


def _principal_matches(statement: Mapping[str, Any], caller: Caller) -> bool:
    if "NotPrincipal" in statement:
        raise UnsupportedPolicy("NotPrincipal is not evaluated by the sandbox")
    principal = statement.get("Principal")
    if principal == "*":
        return True
    if not isinstance(principal, Mapping):
        raise UnsupportedPolicy(f"a resource policy's Principal must be '*' or a map: {principal!r}")
    for kind, values in principal.items():
        listed = [str(v) for v in values] if isinstance(values, list) else [str(values)]
        if kind == "AWS":
            for value in listed:
                if value == "*" or value in caller.arns:
                    return True
                if caller.account is not None and value in (
                    caller.account,
                    f"arn:aws:iam::{caller.account}:root",
                ):
                    return True
        elif kind == "Service":
            if caller.service is not None and caller.service in listed:
                return True
        elif kind not in ("Federated", "CanonicalUser"):
            raise UnsupportedPolicy(f"principal type {kind} is not evaluated by the sandbox")
    return False


def evaluate(
    document: Mapping[str, Any] | None, request: Request, caller: Caller, *, deny_only: bool = False
) -> Decision:
    """The resource policy's decision on ``request`` by ``caller``: EXPLICIT_DENY when a matching
    Deny applies, ALLOWED when a matching Allow does, else IMPLICIT_DENY. ``deny_only``: Allow
    statements are not looked at (they cannot change the outcome of a call the identity policy must
    allow anyway, and moto's default topic policy holds condition keys the sandbox does not model)."""
    if document is None:
        return Decision.IMPLICIT_DENY
    allowed = False
    for statement in _statements(document):
        if deny_only and statement.get("Effect") != "Deny":
            continue
        if not _principal_matches(statement, caller):
            continue
        rest = {k: v for k, v in statement.items() if k not in ("Principal", "NotPrincipal")}
        if not statement_applies(rest, request):
            continue
        if statement.get("Effect") == "Deny":
            return Decision.EXPLICIT_DENY
        allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY


def _statements(document: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    statements = document.get("Statement") or []
    return statements if isinstance(statements, list) else [statements]


def delivery_decision(target_arn: str, action: str, *, service: str, source_arn: str) -> Decision:
    """Whether the AWS service ``service`` may deliver to ``target_arn`` on behalf of ``source_arn``
    (an EventBridge rule): the target's policy must allow it and not deny it."""
    source_account = source_arn.split(":")[4]
    request = Request(
        action,
        target_arn,
        {"aws:SourceArn": [source_arn], "aws:SourceAccount": [source_account]},
    )
    return evaluate(resource_policy(target_arn), request, Caller(service=service))
