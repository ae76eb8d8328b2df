"""IAM enforced: a control-plane call its role does not allow fails with the service's AccessDenied.

Each call becomes one or more authorization requests (sandbox.emulator.aws_calls.policy): its IAM action
(``<prefix>:<Action>``; prefixes and action names that differ from botocore's are in
``_PREFIXES`` / ``_ACTIONS``), its resource ARN (derived from the parameters by ``_RESOURCES``;
``*`` for operations not listed, and for every action the Service Authorization Reference gives no
resource type, whatever it names: only a ``"Resource": "*"`` statement allows those, as IAM does),
plus the ``iam:PassRole`` a call implies (``_PASSED_ROLES``).
The role's policies are read from moto's IAM backend, where the deployer puts what CloudFormation
would: inline policies (SAM's policy templates among them) and attached managed policies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlparse

from moto.cloudformation.models import cloudformation_backends
from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends

from sandbox.emulator.aws_calls import resource_policy, service_authorization
from sandbox.emulator.aws_calls.errors import error_code, error_response
from sandbox.emulator.aws_calls.interception import Answer, Call
from sandbox.emulator.aws_calls.policy import Decision, Request, evaluate

# botocore service → IAM action prefix, where the signing name is not the prefix.
_PREFIXES: Final = {"resourcegroupstaggingapi": "tag", "cloudwatch": "cloudwatch"}

# (service, operation) → IAM action name, where it is not the operation's name.
_BUDGET_MODIFY: Final = (
    "CreateBudget",
    "DeleteBudget",
    "UpdateBudget",
    "CreateNotification",
    "DeleteNotification",
)
_BUDGET_VIEW: Final = ("DescribeBudget", "DescribeBudgets", "DescribeNotificationsForBudget")
_ACTIONS: Final[dict[tuple[str, str], str]] = {
    ("lambda", "Invoke"): "InvokeFunction",
    **{("budgets", op): "ModifyBudget" for op in (*_BUDGET_MODIFY, "CreateSubscriber", "DeleteSubscriber")},
    **{("budgets", op): "ViewBudget" for op in (*_BUDGET_VIEW, "DescribeSubscribersForNotification")},
    # SQS's batch calls are authorized as their single actions (no sqs:*Batch action exists)
    **{("sqs", f"{op}Batch"): op for op in ("SendMessage", "DeleteMessage", "ChangeMessageVisibility")},
}

# Operations IAM does not authorize.
_UNAUTHORIZED: Final = frozenset({("sts", "GetCallerIdentity")})

# (service, operation) → parameter paths holding roles the call passes, and the service they go to.
_PASSED_ROLES: Final[dict[tuple[str, str], tuple[tuple[str, ...], str]]] = {
    ("sagemaker", "CreateCluster"): (("InstanceGroups", "ExecutionRole"), "sagemaker.amazonaws.com"),
    ("sagemaker", "UpdateCluster"): (("InstanceGroups", "ExecutionRole"), "sagemaker.amazonaws.com"),
}


@dataclass(frozen=True)
class Where:
    partition: str
    region: str
    account: str

    def arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        return f"arn:{self.partition}:{service}:{self.region if regional else ''}:{self.account}:{resource}"


# A transaction is authorized as its items' own actions (no dynamodb:Transact* IAM action exists).
_TRANSACT_ACTIONS: Final = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def _transaction(p: Mapping[str, Any], w: Where) -> list[tuple[str, str]]:
    return sorted(
        {
            (f"dynamodb:{_TRANSACT_ACTIONS[kind]}", _table_arn(str(item[kind]["TableName"]), w))
            for item in p.get("TransactItems") or []
            for kind in item
        }
    )


def _dynamodb(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    table = p.get("TableName")
    if table is None:  # batch operations name their tables inside
        return [_table_arn(t, w) for t in p.get("RequestItems") or {}] or ["*"]
    arn = _table_arn(str(table), w)
    return [f"{arn}/index/{p['IndexName']}" if p.get("IndexName") else arn]


def _table_arn(table: str, w: Where) -> str:
    return table if table.startswith("arn:") else w.arn("dynamodb", f"table/{table}")


def _states(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    for key in ("executionArn", "stateMachineArn", "activityArn", "resourceArn", "mapRunArn"):
        if p.get(key):
            return [str(p[key])]
    return ["*"]


def _sagemaker(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if p.get("ResourceArn"):
        return [str(p["ResourceArn"])]
    name = p.get("ClusterName")
    if name is None:
        return ["*"]
    # AWS authorizes against cluster/<id>; a name stands in for the id (see docs/sandbox.md)
    return [str(name) if str(name).startswith("arn:") else w.arn("sagemaker", f"cluster/{str(name).lower()}")]


def _events(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if op == "PutEvents":
        buses = {str(entry.get("EventBusName") or "default") for entry in p.get("Entries") or []}
        return [b if b.startswith("arn:") else w.arn("events", f"event-bus/{b}") for b in sorted(buses)]
    bus = str(p.get("EventBusName") or "default")
    if p.get("Rule") or (p.get("Name") and op.endswith("Rule")):
        rule = str(p.get("Rule") or p.get("Name"))
        return [w.arn("events", f"rule/{rule}" if bus == "default" else f"rule/{bus}/{rule}")]
    return [bus if bus.startswith("arn:") else w.arn("events", f"event-bus/{bus}")]


def _budgets(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    name = p.get("BudgetName") or (p.get("Budget") or {}).get("BudgetName")
    return [w.arn("budgets", f"budget/{name}", regional=False)] if name else ["*"]


def _s3(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if not p.get("Bucket"):
        return ["*"]
    bucket = f"arn:{w.partition}:s3:::{p['Bucket']}"
    # object operations act on <bucket>/<key>, bucket operations (tagging, listing) on the bucket
    return [f"{bucket}/{p['Key']}"] if p.get("Key") else [bucket]


def _fsx(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if p.get("ResourceARN"):
        return [str(p["ResourceARN"])]
    ids = p.get("FileSystemIds") or ([p["FileSystemId"]] if p.get("FileSystemId") else [])
    return [w.arn("fsx", f"file-system/{i}") for i in ids] or ["*"]


# EC2 resource id prefix → the resource type in its ARN
_EC2_TYPES: Final = {
    "sg": "security-group",
    "eni": "network-interface",
    "vol": "volume",
    "i": "instance",
    "subnet": "subnet",
    "vpc": "vpc",
}


def _ec2(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    # CreateTags / DeleteTags name their resources by id; Describe* take no resource-level permission
    ids = [str(i) for i in p.get("Resources") or []] if op in ("CreateTags", "DeleteTags") else []
    return [w.arn("ec2", f"{_EC2_TYPES.get(i.split('-', 1)[0], 'unknown')}/{i}") for i in ids] or ["*"]


def _stack(p: Mapping[str, Any], w: Where) -> Any:
    """The live stack the call names (by name or id), or None."""
    name = str(p.get("StackName"))
    stacks = cloudformation_backends[w.account][w.region].stacks.values()
    return next((s for s in stacks if name in (s.name, s.stack_id) and s.status != "DELETE_COMPLETE"), None)


def _cloudformation(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    name = p.get("StackName")
    if name is None:
        return ["*"]
    if str(name).startswith("arn:"):
        return [str(name)]
    stack = _stack(p, w)
    return [stack.stack_id if stack is not None else w.arn("cloudformation", f"stack/{name}/*")]


def _resource_tags(call: Call, w: Where) -> dict[str, str] | None:
    """The tags of the resource a call acts on, for ``aws:ResourceTag`` conditions (None: not
    modeled for this service, so such a condition is refused; {} for a resource with no tags)."""
    if call.service != "cloudformation" or call.params.get("StackName") is None:
        return None
    stack = _stack(call.params, w)
    return dict(stack.tags) if stack is not None else {}


def _sns(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    arn = p.get("TopicArn") or p.get("TargetArn") or p.get("ResourceArn")
    return [str(arn)] if arn else ["*"]


def _sqs(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if p.get("SourceArn"):  # the dead-letter queue redrive (Start/ListMessageMoveTasks)
        return [str(p["SourceArn"])]
    url = p.get("QueueUrl")
    if url is None:
        return [w.arn("sqs", str(p["QueueName"]))] if p.get("QueueName") else ["*"]
    account, name = urlparse(str(url)).path.strip("/").split("/")[-2:]
    return [f"arn:{w.partition}:sqs:{w.region}:{account}:{name}"]


def _lambda(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    name = p.get("FunctionName")
    if name is None:
        return ["*"]
    arn = unquote(str(name)) if str(name).startswith("arn:") else w.arn("lambda", f"function:{name}")
    return [f"{arn}:{p['Qualifier']}" if p.get("Qualifier") else arn]


def _iam(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    if p.get("PolicySourceArn"):  # SimulatePrincipalPolicy acts on the principal it simulates
        return [str(p["PolicySourceArn"])]
    if p.get("RoleName"):
        return [f"arn:{w.partition}:iam::{w.account}:role/{p['RoleName']}"]
    # a user's ARN holds its path; ``user/*`` grants, the only form the template uses, match it either way
    return [f"arn:{w.partition}:iam::{w.account}:user/{p['UserName']}"] if p.get("UserName") else ["*"]


def _ssm(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    # TerminateSession / ResumeSession act on session/<id>; the other session calls take no resource
    return [w.arn("ssm", f"session/{p['SessionId']}")] if p.get("SessionId") else ["*"]


def _logs(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    # the Service Authorization Reference: log-stream for the calls on one stream's events, log-group
    # (without the ":*" CloudFormation's Arn has) for the rest
    group = p.get("logGroupName")
    if group is None:
        return ["*"]
    if p.get("logStreamName") and op in ("GetLogEvents", "PutLogEvents"):
        return [w.arn("logs", f"log-group:{group}:log-stream:{p['logStreamName']}")]
    return [w.arn("logs", f"log-group:{group}")]


def _elbv2(op: str, p: Mapping[str, Any], w: Where) -> list[str]:
    # the Service Authorization Reference: Register/DeregisterTargets act on the targetgroup; the
    # Describe* calls take no resource-level permissions
    if op in ("RegisterTargets", "DeregisterTargets") and p.get("TargetGroupArn"):
        return [str(p["TargetGroupArn"])]
    return ["*"]


_RESOURCES: Final[dict[str, Callable[[str, Mapping[str, Any], Where], list[str]]]] = {
    "dynamodb": _dynamodb,
    "stepfunctions": _states,
    "sagemaker": _sagemaker,
    "events": _events,
    "budgets": _budgets,
    "s3": _s3,
    "fsx": _fsx,
    "ec2": _ec2,
    "cloudformation": _cloudformation,
    "sns": _sns,
    "sqs": _sqs,
    "lambda": _lambda,
    "iam": _iam,
    "ssm": _ssm,
    "logs": _logs,
    "elbv2": _elbv2,
}


def iam_action(call: Call) -> str:
    prefix = _PREFIXES.get(call.service, call.service_model.signing_name)
    return f"{prefix}:{_ACTIONS.get((call.service, call.operation), call.operation)}"


def authorization_requests(call: Call) -> list[Request]:
    """What IAM authorizes for ``call`` (empty for calls IAM does not authorize)."""
    if (call.service, call.operation) in _UNAUTHORIZED or call.principal is None:
        return []
    where = Where("aws", call.region, call.principal.account)
    context: dict[str, list[str]] = {
        "aws:RequestedRegion": [call.region],
        "aws:PrincipalAccount": [call.principal.account],
        "aws:PrincipalArn": [call.principal.role_arn],
    }
    tags = call.params.get("Tags")
    if isinstance(tags, list) and all(isinstance(t, dict) and "Key" in t for t in tags):
        context["aws:TagKeys"] = [str(t["Key"]) for t in tags]
        context |= {f"aws:RequestTag/{t['Key']}": [str(t.get("Value", ""))] for t in tags}
    if call.service == "dynamodb" and call.operation in ("TransactWriteItems", "TransactGetItems"):
        requests = [
            Request(action, resource, context) for action, resource in _transaction(call.params, where)
        ]
    else:
        action = iam_action(call)
        derive = _RESOURCES.get(call.service)
        resources = derive(call.operation, call.params, where) if derive else ["*"]
        if service_authorization.resource_types(action) == ():
            # no resource-level permission (fsx:DescribeFileSystems even given FileSystemIds): IAM
            # authorizes "*", which a statement scoped to an ARN never matches
            resources = ["*"]
        resource_tags = _resource_tags(call, where)
        requests = [Request(action, resource, context, resource_tags) for resource in resources]
    if call.service == "sqs" and call.operation == "StartMessageMoveTask":
        # the redrive reads and deletes the dead-letter queue's messages and sends them on as the
        # caller (assumed: AWS's redrive guide names these permissions, not how they are checked)
        source = str(call.params.get("SourceArn"))
        requests += [
            Request(f"sqs:{action}", source, context)
            for action in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")
        ]
        if call.params.get("DestinationArn"):
            requests.append(Request("sqs:SendMessage", str(call.params["DestinationArn"]), context))
    requests += _eks_orchestrator(call, context)
    passed = _PASSED_ROLES.get((call.service, call.operation))
    if passed is not None:
        path, service = passed
        for role in sorted(_values_at(call.params, path)):
            requests.append(Request("iam:PassRole", role, {**context, "iam:PassedToService": [service]}))
    return requests


# HyperPod sets up an EKS orchestrator with its caller's EKS permissions (the EKS prerequisites of
# HyperPod name them; how SageMaker checks them is unverified, docs/sandbox.md): CreateCluster naming
# Orchestrator.Eks.ClusterArn is authorized as these actions on that cluster too.
_EKS_ORCHESTRATOR_ACTIONS: Final = ("eks:DescribeCluster", "eks:CreateAccessEntry")


def _eks_orchestrator(call: Call, context: dict[str, list[str]]) -> list[Request]:
    if (call.service, call.operation) != ("sagemaker", "CreateCluster"):
        return []
    arn = ((call.params.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn")
    return [Request(action, str(arn), context) for action in _EKS_ORCHESTRATOR_ACTIONS] if arn else []


def _values_at(value: Any, path: tuple[str, ...]) -> set[str]:
    if not path:
        return {str(value)} if value is not None else set()
    if isinstance(value, list):
        return set().union(*(_values_at(item, path) for item in value)) if value else set()
    if isinstance(value, dict):
        return _values_at(value.get(path[0]), path[1:])
    return set()


def role_documents(role_arn: str) -> list[dict[str, Any]]:
    """The role's inline and attached managed policies, as moto's IAM backend holds them."""
    account = role_arn.split(":")[4]
    role = iam_backends[account]["aws"].get_role_by_arn(role_arn)
    documents = [_document(text) for text in role.policies.values()]
    for managed in role.managed_policies.values():
        default = next(version for version in managed.versions if version.is_default)
        documents.append(_document(default.document))
    return documents


def boundary_document(role_arn: str) -> dict[str, Any] | None:
    """The role's permissions boundary (a managed policy), or None when it has none: IAM then allows
    only what both the role's policies and the boundary allow."""
    account = role_arn.split(":")[4]
    backend = iam_backends[account]["aws"]
    arn = backend.get_role_by_arn(role_arn).permissions_boundary_arn
    if not arn:
        return None
    default = next(version for version in backend.get_policy(arn).versions if version.is_default)
    return _document(default.document)


def _document(text: Any) -> dict[str, Any]:
    return json.loads(unquote(text)) if isinstance(text, str) else dict(text)


@dataclass(frozen=True)
class Denial:
    principal: str
    action: str
    resource: str
    decision: Decision


class IamEnforcer:
    """An interception check: every call with a principal is authorized against its role."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.denials: list[Denial] = []

    def check(self, call: Call) -> Answer | None:
        principal = call.principal
        requests = authorization_requests(call)
        if principal is None or not requests:
            return None
        try:
            documents = role_documents(principal.role_arn)
            boundary = boundary_document(principal.role_arn)
        except NotFoundException:  # a role IAM does not have allows nothing
            documents, boundary = [], None
        for request in requests:
            decision, kind, article = evaluate(documents, request), "identity-based policy", "an"
            if decision is Decision.ALLOWED and boundary is not None:
                decision, kind, article = evaluate([boundary], request), "permissions boundary", "a"
            if decision is Decision.ALLOWED:
                continue
            with self._lock:
                self.denials.append(
                    Denial(principal.assumed_role_arn, request.action, request.resource, decision)
                )
            reason = (
                f"with an explicit deny in {article} {kind}"
                if decision is Decision.EXPLICIT_DENY
                else f"because no {kind} allows the {request.action} action"
            )
            message = (
                f"User: {principal.assumed_role_arn} is not authorized to perform: {request.action} "
                f"on resource: {request.resource} {reason}"
            )
            return self._access_denied(call, message)
        return self._resource_policy_check(call, requests)

    def _resource_policy_check(self, call: Call, requests: list[Request]) -> Answer | None:
        """A queue's or topic's explicit Deny refuses the call
        (sandbox.emulator.aws_calls.resource_policy)."""
        principal = call.principal
        if principal is None or (call.service, call.operation) not in resource_policy.GUARDED:
            return None
        caller = resource_policy.Caller(
            account=principal.account, arns=(principal.role_arn, principal.assumed_role_arn)
        )
        for request in requests:
            if not request.resource.startswith("arn:"):
                continue
            document = resource_policy.resource_policy(request.resource)
            if (
                resource_policy.evaluate(document, request, caller, deny_only=True)
                is not Decision.EXPLICIT_DENY
            ):
                continue
            with self._lock:
                self.denials.append(
                    Denial(
                        principal.assumed_role_arn, request.action, request.resource, Decision.EXPLICIT_DENY
                    )
                )
            return self._access_denied(
                call,
                f"User: {principal.assumed_role_arn} is not authorized to perform: {request.action} "
                f"on resource: {request.resource} with an explicit deny in a resource-based policy",
            )
        return None

    @staticmethod
    def _access_denied(call: Call, message: str) -> Answer:
        code = error_code(call.service_model, call.operation, "access_denied")
        status, headers, body = error_response(call.service_model, code, message)
        return Answer(status, headers, body)
