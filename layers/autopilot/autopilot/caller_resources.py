"""No confused deputy: what a caller names, Autopilot uses with its own role only if the caller may.

A create hands SageMaker, with the CreateCluster workflow's role, the execution roles, lifecycle
buckets, subnets and security groups the request names. Without these checks a caller allowed only
``execute-api:Invoke`` made Autopilot pass a role the caller could not pass, run lifecycle scripts
(as root, on nodes holding that role) from another account's bucket, and put the nodes in another
VPC's subnets and security groups (issue 20, finding 4). So, before anything is registered:

- each role (``InstanceGroups[i].ExecutionRole``, ``ClusterRole``): the caller is one of the stack's
  ``AdminPrincipalArns``, or IAM's policy simulator says the caller's own policies allow
  ``iam:PassRole`` on it with ``iam:PassedToService`` = ``sagemaker.amazonaws.com``; else *forbidden*
  (403). The caller's principal is the signer's IAM user, or the role of its assumed-role session
  (its ARN with its path, from GetRole: Identity Center's roles live under ``/aws-reserved/...``);
  the account root may pass any role of its account; a principal IAM cannot simulate (a federated
  user, another account) only as an admin. The role simulated is exactly the one SageMaker will get:
  a value that is not a role ARN, a role GetRole does not know, or one named otherwise than GetRole's
  ARN (another case, no path) is *invalid* (400); an allow resting on MissingContextValues is none.
- each lifecycle bucket (``LifeCycleConfig.SourceS3Uri``): S3 answers GetBucketLocation with
  ``ExpectedBucketOwner`` = the stack's account; a bucket of another account, or none of that name
  (whoever creates it next owns what the nodes run), is *invalid* (400).
- subnets and security groups (``VpcConfig``, each group's ``OverrideVpcConfig``): each this account's
  and in the cluster's one VPC (the VPC of ``VpcConfig``'s subnets); else *invalid*. An ID EC2 does
  not know is left to SageMaker's own refusal: no one can make a resource of that ID later.

AWS throttling or failing is raised as it is (the API answers 503 with Retry-After); Autopilot's own
role denied a check's call refuses the request (*forbidden*, naming the call), never lets it through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from autopilot_config.validation.documents import ClusterDocuments, Located, as_str, parse_s3_uri, strings
from autopilot_config.validation.report import CLUSTER_CONFIG, Problem
from botocore.exceptions import ClientError, ParamValidationError

from autopilot.aws import THROTTLING_CODES

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")

PASSED_TO: Final = "sagemaker.amazonaws.com"
# An IAM role's ARN: arn:<partition>:iam::<account>:role/<path/><name>
_ROLE_ARN: Final = re.compile(r"^arn:aws[a-z-]*:iam::(?P<account>\d{12}):role/[\w+=,.@/-]+$")
REGISTER_TARGETS: Final = "elasticloadbalancing:RegisterTargets"
# A check's own call refused: Autopilot's role lacks the permission (template.yaml, ApiCallerChecksPolicy).
_DENIED: Final = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})


class _Unavailable(Exception):
    """Autopilot's own role may not make a check's call."""


@dataclass
class CallerRefusals:
    """What the caller may not use (``forbidden``: 403) and what is not this account's or not in the
    cluster's VPC (``invalid``: 400), each located in cluster-config.json."""

    forbidden: list[Problem] = field(default_factory=list)
    invalid: list[Problem] = field(default_factory=list)

    def refuse(self, where: Located, message: str) -> None:
        self.forbidden.append(Problem(file=where.file, path=where.path, message=message))

    def reject(self, where: Located, message: str) -> None:
        self.invalid.append(Problem(file=where.file, path=where.path, message=message))


class CallerResourceChecker:
    """The checks of one stack's ``account``. Clients are injectable; otherwise the layer's cached
    clients, made on first use."""

    def __init__(
        self,
        *,
        account: str,
        region: str | None = None,
        iam: IAMClient | None = None,
        s3: S3Client | None = None,
        ec2: EC2Client | None = None,
    ) -> None:
        self.account = account
        self.region = region
        self._clients: dict[str, Any] = {k: v for k, v in (("iam", iam), ("s3", s3), ("ec2", ec2)) if v}

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            from autopilot.aws import client  # noqa: PLC0415  (only the API's create path needs them)

            self._clients[service] = client(service, self.region)
        return self._clients[service]

    def check(self, docs: ClusterDocuments, caller: str | None, *, admin: bool = False) -> CallerRefusals:
        """``admin``: the caller is one of the stack's AdminPrincipalArns (may pass any allowed role)."""
        refusals = CallerRefusals()
        if not admin:
            self._check_roles(docs, caller, refusals)
        self._check_buckets(docs, refusals)
        self._check_network(docs, refusals)
        return refusals

    # -- plumbing ------------------------------------------------------------------------------------
    def _call(self, what: str, call: Callable[[], T], *, passes: tuple[str, ...] = ()) -> T:
        """``call()``. AWS throttling or failing, and the error codes in ``passes``, are raised as they
        are (the API answers the first 503); any other refusal becomes _Unavailable, so the request is
        refused, never let through nor answered 500."""
        try:
            return call()
        except ClientError as exc:
            code = _code(exc)
            if code in passes or _transient(exc):
                raise
            if code in _DENIED:
                raise _Unavailable(
                    f"Autopilot could not check it: its own role may not call {what} ({code}); "
                    "the stack's ApiCallerChecksPolicy grants it"
                ) from exc
            message = str(exc.response.get("Error", {}).get("Message", ""))
            raise _Unavailable(f"Autopilot could not check it: {what} answered {code}: {message}") from exc

    # -- roles: the caller's own iam:PassRole ----------------------------------------------------------
    def _check_roles(self, docs: ClusterDocuments, caller: str | None, refusals: CallerRefusals) -> None:
        roles: list[Located] = []
        for where in docs.role_arns():
            if _ROLE_ARN.match(where.value):
                roles.append(where)
            else:  # never skipped: a value Autopilot cannot check is not passed on
                refusals.reject(where, "is not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)")
        if not roles:
            return
        try:
            source, why_not = self._policy_source(caller)
        except _Unavailable as exc:
            for where in roles:
                refusals.refuse(where, str(exc))
            return
        if source == _ROOT:
            return
        if source is None:
            for where in roles:
                refusals.refuse(where, why_not)
            return
        decisions: dict[str, str] = {}
        try:
            # first the roles as IAM spells them, then the simulations of those IAM knows so
            misnamed = {arn: self._misnamed(arn) for arn in dict.fromkeys(where.value for where in roles)}
            for arn, why in misnamed.items():
                if why is None:
                    decisions[arn] = self._may_pass(source, arn)
        except _Unavailable as exc:
            for where in roles:
                refusals.refuse(where, str(exc))
            return
        for where in roles:
            if (why := misnamed[where.value]) is not None:
                refusals.reject(where, why)
                continue
            decision = decisions[where.value]
            if decision != "allowed":
                denied = "explicitly deny" if decision == "explicitDeny" else "do not allow"
                refusals.refuse(
                    where,
                    f"the caller ({caller}) may not pass this role: IAM's policy simulator says {source}'s "
                    f"policies {denied} iam:PassRole on {where.value} to {PASSED_TO}. Autopilot passes "
                    "only roles its caller may pass (or any role, for the stack's AdminPrincipalArns)",
                )

    def _policy_source(self, caller: str | None) -> tuple[str | None, str]:
        """The IAM principal IAM simulates for ``caller`` (``_ROOT`` for the account root), or None and
        why it cannot be checked."""
        ask_admin = "ask for the stack's AdminPrincipalArns, or call as an IAM user or role of the account"
        if caller is None:
            return None, f"the caller is unknown: whether it may pass the role cannot be checked; {ask_admin}"
        parts = caller.split(":", 5)
        if len(parts) != 6 or parts[4] != self.account:
            return None, (
                f"the caller ({caller}) is not a principal of this account ({self.account}): IAM simulates "
                f"only its own users and roles; {ask_admin}"
            )
        kind, _, rest = parts[5].partition("/")
        if parts[2] == "iam" and parts[5] == "root":
            return _ROOT, ""
        if parts[2] == "iam" and kind == "user":
            return caller, ""
        if parts[2] == "sts" and kind == "assumed-role":
            role_name = rest.split("/", 1)[0]
            try:
                role = self._call(
                    "iam:GetRole",
                    lambda: self._client("iam").get_role(RoleName=role_name),
                    passes=("NoSuchEntity",),
                )
            except ClientError as exc:
                if _code(exc) != "NoSuchEntity":
                    raise
                return None, f"the caller's role {role_name} does not exist any more"
            return str(role["Role"]["Arn"]), ""
        return None, (
            f"Autopilot cannot check what the caller ({caller}) may pass: IAM's policy simulator takes IAM "
            f"users and roles, not a {kind or 'principal of that kind'}; {ask_admin}"
        )

    def _misnamed(self, role_arn: str) -> str | None:
        """Why ``role_arn`` is not the ARN GetRole gives for its name (None: it is). IAM's role names are
        unique case-insensitively but a policy's role ARN matches case-sensitively and with the role's
        path, so the simulation must be of the role exactly as IAM (and SageMaker) will name it. A role
        of another account is left to ExecutionRolePolicy (always refused)."""
        match = _ROLE_ARN.match(role_arn)
        if match is None or match.group("account") != self.account:
            return None
        name = role_arn.rsplit("/", 1)[-1]
        try:
            role = self._call(
                "iam:GetRole",
                lambda: self._client("iam").get_role(RoleName=name),
                passes=("NoSuchEntity",),
            )
        except ClientError as exc:
            if _code(exc) != "NoSuchEntity":
                raise
            return f"no IAM role named {name} in this account ({self.account})"
        actual = str(role["Role"]["Arn"])
        if actual != role_arn:
            return (
                f"IAM names this role {actual}: name it exactly so (IAM matches a role's ARN "
                "case-sensitively and with its path)"
            )
        return None

    def _may_pass(self, source: str, role_arn: str) -> str:
        context = {"ContextKeyName": "iam:PassedToService", "ContextKeyValues": [PASSED_TO]}
        return self._simulate(source, "iam:PassRole", role_arn, [{**context, "ContextKeyType": "string"}])

    def _simulate(self, source: str, action: str, resource: str, context: list[Any]) -> str:
        """IAM's decision on ``action`` for ``source``'s own policies: allowed, explicitDeny, implicitDeny."""
        response = self._call(
            "iam:SimulatePrincipalPolicy",
            lambda: self._client("iam").simulate_principal_policy(
                PolicySourceArn=source, ActionNames=[action], ResourceArns=[resource], ContextEntries=context
            ),
        )
        results = response.get("EvaluationResults", [])
        decisions = {str(r.get("EvalDecision")) for r in results}
        if "explicitDeny" in decisions:
            return "explicitDeny"
        # A condition on a key the simulation lacked (MissingContextValues) was not evaluated: the
        # answer might be a deny in the real request, so it is not an allow.
        if any(r.get("MissingContextValues") for r in results):
            return "implicitDeny"
        return "allowed" if decisions == {"allowed"} else "implicitDeny"

    # -- login target groups: the caller's own elasticloadbalancing:RegisterTargets ---------------------
    def check_target_groups(self, arns: list[str], caller: str | None) -> list[tuple[int, str]]:
        """(index, why) for each ``loginTargetGroupArns`` entry the caller may not register targets in
        itself: Autopilot's LoginTargetsFunction would put the login nodes into it (a load balancer's
        traffic to them). Call it for callers that are not admins."""
        if not arns:
            return []
        try:
            source, why_not = self._policy_source(caller)
            if source == _ROOT:
                return []
            if source is None:
                return [(index, why_not) for index in range(len(arns))]
            refused: list[tuple[int, str]] = []
            for index, arn in enumerate(arns):
                decision = self._simulate(source, REGISTER_TARGETS, arn, [])
                if decision != "allowed":
                    denied = "explicitly deny" if decision == "explicitDeny" else "do not allow"
                    refused.append(
                        (
                            index,
                            f"the caller ({caller}) may not register targets in this target group: IAM's "
                            f"policy simulator says {source}'s policies {denied} {REGISTER_TARGETS} on it. "
                            "Autopilot puts login nodes only into target groups its caller may",
                        )
                    )
            return refused
        except _Unavailable as exc:
            return [(index, str(exc)) for index in range(len(arns))]

    # -- lifecycle buckets: this account's --------------------------------------------------------------
    def _check_buckets(self, docs: ClusterDocuments, refusals: CallerRefusals) -> None:
        answers: dict[str, str | None] = {}
        for group in docs.groups:
            uri = as_str((group.lifecycle or {}).get("SourceS3Uri"))
            parsed = parse_s3_uri(uri or "")
            if uri is None or parsed is None:
                continue  # absent or not s3://: the schema and rules report it
            where = Located(CLUSTER_CONFIG, f"{group.path}.LifeCycleConfig.SourceS3Uri", uri)
            bucket = parsed[0]
            if bucket not in answers:
                answers[bucket] = self._bucket_problem(bucket)
            if (problem := answers[bucket]) is not None:
                refusals.reject(where, problem)

    def _bucket_problem(self, bucket: str) -> str | None:
        # Not through _call: S3 answers AccessDenied for a bucket another account owns, the very case
        # checked (and the stack grants the call on every bucket, so only a bucket policy denying
        # Autopilot's role would look the same: refused too, as it must be).
        try:
            self._client("s3").get_bucket_location(Bucket=bucket, ExpectedBucketOwner=self.account)
        except ClientError as exc:
            code = _code(exc)
            if code == "NoSuchBucket":
                return (
                    f"bucket {bucket} does not exist: whoever creates a bucket of that name next would own "
                    "the scripts HyperPod runs as root on the nodes; create it in this account first"
                )
            if code in ("AccessDenied", "403"):
                return (
                    f"bucket {bucket} is not this account's ({self.account}): S3 refused GetBucketLocation "
                    "with this account as ExpectedBucketOwner (AccessDenied: another account owns it, or its "
                    "policy denies Autopilot); HyperPod would run another account's scripts as root on nodes"
                )
            if code == "InvalidBucketName":
                return f"'{bucket}' is not a valid bucket name"
            if _transient(exc):
                raise
            return f"could not check that bucket {bucket} is this account's: S3 answered {code}"
        except ParamValidationError:
            return f"'{bucket}' is not a valid bucket name"
        return None

    # -- subnets and security groups: this account's, in the cluster's VPC -----------------------------
    def _check_network(self, docs: ClusterDocuments, refusals: CallerRefusals) -> None:
        configs = docs.vpc_configs()
        subnets: list[tuple[Located, dict[str, Any]]] = []
        try:
            for base, vpc in configs:
                for index, subnet_id in strings(vpc, "Subnets"):
                    where = Located(CLUSTER_CONFIG, f"{base}.Subnets[{index}]", subnet_id)
                    found = self._described("subnet", subnet_id)
                    if found is not None:
                        subnets.append((where, found))
            cluster_vpc = next((s.get("VpcId") for w, s in subnets), None)
            for where, subnet in subnets:
                if subnet.get("OwnerId") not in (None, self.account):
                    refusals.reject(
                        where,
                        f"subnet {where.value} is account {subnet.get('OwnerId')}'s (shared with this one); "
                        f"a cluster's subnets must be this account's ({self.account})",
                    )
                elif subnet.get("VpcId") != cluster_vpc:
                    refusals.reject(
                        where,
                        f"subnet {where.value} is in {subnet.get('VpcId')}, not the cluster's VPC "
                        f"{cluster_vpc} (that of VpcConfig.Subnets): a cluster's subnets are in one VPC",
                    )
            for base, vpc in configs:
                for index, group_id in strings(vpc, "SecurityGroupIds"):
                    where = Located(CLUSTER_CONFIG, f"{base}.SecurityGroupIds[{index}]", group_id)
                    group = self._described("security group", group_id)
                    if group is None:
                        continue
                    if group.get("OwnerId") not in (None, self.account):
                        refusals.reject(
                            where,
                            f"security group {group_id} is account {group.get('OwnerId')}'s; a cluster's "
                            f"security groups must be this account's ({self.account})",
                        )
                    elif cluster_vpc is not None and group.get("VpcId") != cluster_vpc:
                        refusals.reject(
                            where,
                            f"security group {group_id} is in {group.get('VpcId')}, not the cluster's VPC "
                            f"{cluster_vpc}: a security group applies only to its own VPC's instances",
                        )
        except _Unavailable as exc:
            for base, _ in configs:
                refusals.refuse(Located(CLUSTER_CONFIG, base, ""), str(exc))

    def _described(self, kind: str, resource_id: str) -> dict[str, Any] | None:
        """The subnet or security group as EC2 describes it; None for an ID EC2 does not know."""
        ec2 = self._client("ec2")
        unknown = (
            "InvalidSubnetID.NotFound",
            "InvalidSubnetID.Malformed",
            "InvalidGroup.NotFound",
            "InvalidGroupId.Malformed",
        )
        try:
            if kind == "subnet":
                response = self._call(
                    "ec2:DescribeSubnets",
                    lambda: ec2.describe_subnets(SubnetIds=[resource_id]),
                    passes=unknown,
                )
                found = response.get("Subnets", [])
            else:
                response = self._call(
                    "ec2:DescribeSecurityGroups",
                    lambda: ec2.describe_security_groups(GroupIds=[resource_id]),
                    passes=unknown,
                )
                found = response.get("SecurityGroups", [])
        except ClientError as exc:
            if _code(exc) in unknown:
                return None
            raise
        return dict(found[0]) if found else None


_ROOT: Final = "<account root>"


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _transient(exc: ClientError) -> bool:
    """AWS throttling or failing (still, after the SDK's retries): the API answers 503 with Retry-After."""
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return _code(exc) in THROTTLING_CODES or status >= 500
