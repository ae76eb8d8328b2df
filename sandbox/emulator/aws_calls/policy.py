"""IAM identity-policy evaluation: explicit Deny wins, else any Allow, else implicitly denied.

Matches as IAM does: actions case-insensitively, resources case-sensitively, ``*`` and ``?``
wildcards in both, ``NotAction`` / ``NotResource``, and the Condition operators in ``_OPERATORS``
(each with ``IfExists``). ``aws:ResourceTag/…`` keys are evaluated where the request carries the
resource's tags (``Request.resource_tags``). Anything the sandbox cannot evaluate — another
operator, a set operator (``ForAnyValue:``), a policy variable, a condition key the request
context does not model — raises :class:`UnsupportedPolicy` instead of allowing or denying silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any, Final


class UnsupportedPolicy(ValueError):
    """A policy uses IAM features the sandbox does not evaluate: fix the sandbox or the policy."""


class Decision(Enum):
    ALLOWED = "allowed"
    IMPLICIT_DENY = "implicit deny"
    EXPLICIT_DENY = "explicit deny"


@dataclass(frozen=True)
class Request:
    action: str  # "states:StartExecution"
    resource: str  # an ARN or "*"
    context: Mapping[str, list[str]]  # condition keys the sandbox models → values
    resource_tags: Mapping[str, str] | None = None  # None: not looked up for this resource type


# Condition keys the request context can hold (prefixes end with "/"); any other key is refused.
MODELED_KEYS: Final = frozenset(
    {
        "aws:requestedregion",
        "aws:principalaccount",
        "aws:principalarn",
        "iam:passedtoservice",
        "aws:tagkeys",
        # set on a service's delivery (sandbox.emulator.aws_calls.resource_policy); absent from a
        # principal's call
        "aws:sourcearn",
        "aws:sourceaccount",
    }
)
MODELED_PREFIXES: Final = ("aws:requesttag/",)
_RESOURCE_TAG: Final = "aws:resourcetag/"


@cache
def _pattern(text: str, ignore_case: bool) -> re.Pattern[str]:
    if "${" in text:
        raise UnsupportedPolicy(f"policy variables are not evaluated by the sandbox: {text}")
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)
    return re.compile(regex, re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def wildcard_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    return _pattern(pattern, ignore_case).fullmatch(value) is not None


def arn_match(pattern: str, arn: str) -> bool:
    """IAM matches an ARN part by part: each of its six colon-separated parts on its own, so a
    ``*`` never reaches across a ``:`` (``"*"`` alone matches any resource)."""
    if pattern == "*":
        return True
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(actual) and all(map(wildcard_match, wanted, actual))


def _arn_like(patterns: list[str], value: str) -> bool:
    return any(arn_match(p, value) for p in patterns)


def _listed(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _string_equals(patterns: list[str], value: str) -> bool:
    return value in patterns


def _string_equals_ignore_case(patterns: list[str], value: str) -> bool:
    return value.lower() in {p.lower() for p in patterns}


def _string_like(patterns: list[str], value: str) -> bool:
    return any(wildcard_match(p, value) for p in patterns)


def _bool(patterns: list[str], value: str) -> bool:
    return value.lower() in {p.lower() for p in patterns}


# operator → (positive matcher, negated): a negated operator matches when no value matches.
_OPERATORS: Final[dict[str, tuple[Callable[[list[str], str], bool], bool]]] = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (_string_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_string_equals_ignore_case, True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "ArnEquals": (_arn_like, False),
    "ArnLike": (_arn_like, False),
    "ArnNotEquals": (_arn_like, True),
    "ArnNotLike": (_arn_like, True),
    "Bool": (_bool, False),
}


def _key_modeled(key: str, request: Request) -> bool:
    lowered = key.lower()
    if lowered.startswith(_RESOURCE_TAG):
        return request.resource_tags is not None
    return lowered in MODELED_KEYS or lowered.startswith(MODELED_PREFIXES)


def _context(request: Request) -> dict[str, list[str]]:
    tags = request.resource_tags or {}
    return {**request.context, **{f"aws:ResourceTag/{k}": [v] for k, v in tags.items()}}


def _condition_holds(operator: str, key: str, expected: Any, request: Request) -> bool:
    if ":" in operator and operator.split(":", 1)[0] in ("ForAnyValue", "ForAllValues"):
        raise UnsupportedPolicy(f"set operator {operator} is not evaluated by the sandbox")
    if_exists = operator.endswith("IfExists")
    name = operator.removesuffix("IfExists")
    lowered = key.lower()
    if name != "Null" and name not in _OPERATORS:
        raise UnsupportedPolicy(f"condition operator {operator} is not evaluated by the sandbox")
    # before Null too: an unmodeled key is always absent here, so Null would hold when AWS may not
    if not _key_modeled(key, request):
        raise UnsupportedPolicy(f"condition key {key} is not modeled by the sandbox")
    context = _context(request)
    if name == "Null":
        present = any(k.lower() == lowered for k in context)
        return _listed(expected)[0].lower() == ("false" if present else "true")
    matcher, negated = _OPERATORS[name]
    values = next((v for k, v in context.items() if k.lower() == lowered), None)
    if values is None:  # IAM: a missing key matches only negated operators (and ...IfExists)
        return if_exists or negated
    patterns = _listed(expected)
    matched = any(matcher(patterns, value) for value in values)
    return not matched if negated else matched


def _conditions_hold(conditions: Mapping[str, Mapping[str, Any]], request: Request) -> bool:
    return all(
        _condition_holds(operator, key, expected, request)
        for operator, keys in conditions.items()
        for key, expected in keys.items()
    )


def _statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "Principal" in statement or "NotPrincipal" in statement:
        raise UnsupportedPolicy("an identity policy cannot name a Principal")
    if "Action" in statement:
        action_hit = any(
            wildcard_match(a, request.action, ignore_case=True) for a in _listed(statement["Action"])
        )
    else:
        action_hit = not any(
            wildcard_match(a, request.action, ignore_case=True) for a in _listed(statement["NotAction"])
        )
    if not action_hit:
        return False
    if "Resource" in statement:
        resource_hit = any(arn_match(r, request.resource) for r in _listed(statement["Resource"]))
    else:
        resource_hit = not any(arn_match(r, request.resource) for r in _listed(statement["NotResource"]))
    return resource_hit and _conditions_hold(statement.get("Condition") or {}, request)


def statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    """Whether a statement without Principal (an identity policy's, or a resource policy's once its
    Principal matched) applies to the request: its action, resource and conditions."""
    return _statement_applies(statement, request)


def evaluate(documents: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    """The decision of identity policies ``documents`` on ``request``."""
    allowed = False
    for document in documents:
        statements = document.get("Statement") or []
        for statement in statements if isinstance(statements, list) else [statements]:
            if not _statement_applies(statement, request):
                continue
            if statement.get("Effect") == "Deny":
                return Decision.EXPLICIT_DENY
            allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY
