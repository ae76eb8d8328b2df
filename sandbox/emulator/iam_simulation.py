"""IAM's policy simulator, SimulatePrincipalPolicy, from the policy evaluation the sandbox enforces IAM with.

moto 5.2.5 has no SimulatePrincipalPolicy. Autopilot asks it whether a caller's own policies allow
``iam:PassRole`` on the role a create names (autopilot.caller_resources), and ``validate
--aws`` what an execution role may read; the sandbox answers from the very evaluation that decides its
own IAM enforcement (sandbox.emulator.aws_calls.policy: explicit Deny wins, else an Allow, else implicit
deny), so a decision here is the decision the sandbox would enforce.

As AWS documents it (IAM API reference, SimulatePrincipalPolicy): the principal is a user, group or
role of the account (``NoSuchEntity`` otherwise, ``InvalidInput`` for anything that is not such an ARN);
its identity policies are its inline and attached managed policies (a user's also its groups'); a
role's or user's permissions boundary must allow too; ``ContextEntries`` are the condition keys the
request carries and a key a condition needs but the entries lack is missing (the condition then holds
only for negated operators and ``...IfExists``); each action gets one ``EvaluationResult`` with
``EvalDecision`` ``allowed`` / ``explicitDeny`` / ``implicitDeny`` — on ``EvalResourceName`` for one
resource, with ``ResourceSpecificResults`` for several.

Simplified (docs/sandbox.md, "Unverified against AWS"): ``MatchedStatements`` and
``MissingContextValues`` are always empty, pagination is not modelled, a user's permissions boundary
is not read (moto keeps none), ``PolicyInputList`` / ``ResourcePolicy`` / ``CallerArn`` are refused
(``InvalidInput``); and a condition the sandbox cannot evaluate (sandbox.emulator.aws_calls.policy) is refused
with ``InvalidInput`` naming it rather than answered either way.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Final
from urllib.parse import unquote

from moto.core.responses import ActionResult
from moto.iam.exceptions import InvalidInput, NoSuchEntity, NotFoundException
from moto.iam.models import iam_backends
from moto.iam.responses import IamResponse

from sandbox.emulator.aws_calls.iam import boundary_document, role_documents
from sandbox.emulator.aws_calls.policy import Decision, Request, UnsupportedPolicy, evaluate
from sandbox.emulator.patching import SeamDrift

ACTION: Final = "simulate_principal_policy"
_DECISIONS: Final = {
    Decision.ALLOWED: "allowed",
    Decision.EXPLICIT_DENY: "explicitDeny",
    Decision.IMPLICIT_DENY: "implicitDeny",
}
_REFUSED_PARAMETERS: Final = ("PolicyInputList", "ResourcePolicy", "CallerArn", "ResourceOwner")
_lock = threading.Lock()


def install() -> None:
    """Add SimulatePrincipalPolicy to moto's IAM (IamResponse dispatches an action to the method of its
    snake-case name), for in-process clients and ``sandbox up``'s endpoint; the intercept_aws_calls seam
    authorizes it first (``iam:SimulatePrincipalPolicy`` on the principal), as every call."""
    with _lock:
        if ACTION in IamResponse.__dict__:
            raise SeamDrift("iam simulation: moto's IamResponse has simulate_principal_policy of its own now")
        IamResponse.simulate_principal_policy = _simulate  # type: ignore[attr-defined]


def uninstall() -> None:
    with _lock:
        if ACTION in IamResponse.__dict__:
            delattr(IamResponse, ACTION)


def _document(text: Any) -> dict[str, Any]:
    return json.loads(unquote(text)) if isinstance(text, str) else dict(text)


def _managed(policy: Any) -> dict[str, Any]:
    return _document(next(version for version in policy.versions if version.is_default).document)


def principal_documents(arn: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The principal's identity policies, and the further sets that must allow too (its boundary)."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[2] != "iam" or "/" not in parts[5]:
        raise InvalidInput(f"Invalid ARN: {arn} is not the ARN of an IAM user, group or role")
    account, (kind, _, path_name) = parts[4], parts[5].partition("/")
    backend = iam_backends[account]["aws"]
    name = path_name.rsplit("/", 1)[-1]
    try:
        if kind == "role":
            backend.get_role_by_arn(arn)  # NotFoundException for a role IAM does not have
            boundary = boundary_document(arn)
            return role_documents(arn), [boundary] if boundary is not None else []
        if kind == "user":
            user = backend.get_user(name)
            if user.arn != arn:
                raise NotFoundException(f"User {name} not found")
            documents = [_document(text) for text in user.policies.values()]
            documents += [_managed(policy) for policy in user.managed_policies.values()]
            for group in backend.get_groups_for_user(name):
                documents += [_document(text) for text in group.policies.values()]
                documents += [_managed(policy) for policy in group.managed_policies.values()]
            return documents, []
        if kind == "group":
            group = backend.get_group(name)
            documents = [_document(text) for text in group.policies.values()]
            return documents + [_managed(policy) for policy in group.managed_policies.values()], []
    except (NotFoundException, NoSuchEntity) as exc:
        raise NotFoundException(f"The principal {arn} does not exist.") from exc
    raise InvalidInput(f"Invalid ARN: {arn} is not the ARN of an IAM user, group or role")


def decide(documents: list[dict[str, Any]], limits: list[dict[str, Any]], request: Request) -> Decision:
    decision = evaluate(documents, request)
    for limit in limits:
        if decision is not Decision.ALLOWED:
            break
        decision = evaluate([limit], request)
    return decision


def _context(entries: list[dict[str, Any]]) -> dict[str, list[str]]:
    context: dict[str, list[str]] = {}
    for entry in entries:
        name = str(entry.get("ContextKeyName") or "")
        values = [str(value) for value in entry.get("ContextKeyValues") or []]
        if not name:
            raise InvalidInput("ContextEntries: every entry needs a ContextKeyName")
        context[name] = values
    return context


def _simulate(self: IamResponse) -> ActionResult:
    params = self._get_params()
    for refused in _REFUSED_PARAMETERS:
        if params.get(refused):
            raise InvalidInput(f"the sandbox does not simulate {refused}")
    source = str(params.get("PolicySourceArn") or "")
    actions = [str(a) for a in params.get("ActionNames") or []]
    resources = [str(r) for r in params.get("ResourceArns") or []] or ["*"]
    documents, limits = principal_documents(source)
    context = _context(params.get("ContextEntries") or [])
    results = []
    for action in actions:
        try:
            decisions = [decide(documents, limits, Request(action, r, context)) for r in resources]
        except UnsupportedPolicy as exc:
            raise InvalidInput(f"the sandbox cannot simulate {action} for {source}: {exc}") from exc
        overall = (
            Decision.EXPLICIT_DENY
            if Decision.EXPLICIT_DENY in decisions
            else Decision.ALLOWED
            if all(d is Decision.ALLOWED for d in decisions)
            else Decision.IMPLICIT_DENY
        )
        result: dict[str, Any] = {
            "EvalActionName": action,
            "EvalResourceName": resources[0] if len(resources) == 1 else "*",
            "EvalDecision": _DECISIONS[overall],
            "MatchedStatements": [],
            "MissingContextValues": [],
        }
        if len(resources) > 1:
            result["ResourceSpecificResults"] = [
                {
                    "EvalResourceName": resource,
                    "EvalResourceDecision": _DECISIONS[decision],
                    "MatchedStatements": [],
                    "MissingContextValues": [],
                }
                for resource, decision in zip(resources, decisions, strict=True)
            ]
        results.append(result)
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})
