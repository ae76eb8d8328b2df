"""Who may delete a cluster, and which stack a delete may take with it (DELETE /clusters/{name}).

A cluster may be deleted by the principal that created it and by the stack's AdminPrincipalArns; a
role's sessions are one principal (``assumed-role/R/any-session`` is role ``R``). ``?stackName=`` may
name only a CloudFormation stack tagged ``ClusterName`` = the cluster, and never Autopilot's own.
The same principals may act on the cluster's nodes and its healing switch (``action``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

_ASSUMED_ROLE = re.compile(
    r"arn:(?P<partition>[^:]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+"
)
_ROLE = re.compile(r"arn:(?P<partition>[^:]+):iam::(?P<account>\d{12}):role/(?:.*/)?(?P<role>[^/]+)")


class NotAllowedError(Exception):
    """The caller may not do this to the cluster."""


class StackRefusedError(Exception):
    """The stack named by ``stackName`` may not be deleted with the cluster."""


def principal(arn: str) -> str:
    """The IAM principal an identity ARN acts as: a role for its sessions and its ARN with a path
    (an assumed-role ARN carries no path), else the ARN itself."""
    match = _ASSUMED_ROLE.fullmatch(arn) or _ROLE.fullmatch(arn)
    if match is None:
        return arn
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"


def split_arns(value: str) -> list[str]:
    """``"arn:a,arn:b"`` as the AdminPrincipalArns parameter spells it -> the ARNs."""
    return [arn.strip() for arn in value.split(",") if arn.strip()]


def authorize_delete(
    cluster_name: str,
    caller: str | None,
    created_by: str | None,
    admins: Iterable[str],
    *,
    action: str = "delete",
) -> None:
    """Raise NotAllowedError unless ``caller`` created the cluster or is an admin. A cluster with no
    recorded creator (created outside Autopilot, or before creators were recorded) is the admins'.
    ``action`` words the refusal ("may not <action> cluster 'c'")."""
    if caller is not None:
        acting = principal(caller)
        allowed = {principal(arn) for arn in admins}
        if created_by is not None:
            allowed.add(principal(created_by))
        if acting in allowed:
            return
    raise NotAllowedError(
        f"{caller or 'an unidentified caller'} may not {action} cluster {cluster_name!r}: only the principal "
        "that created it and the stack's AdminPrincipalArns may"
    )


def check_stack(
    cloudformation: CloudFormationClient, stack_name: str, cluster_name: str, *, own_stack: str, tag_key: str
) -> None:
    """Raise StackRefusedError unless the stack exists, is not Autopilot's own and carries the tag
    ``tag_key`` = ``cluster_name`` (the cleanup role may delete only such stacks)."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        # CloudFormation answers an unknown stack with ValidationError "Stack with id x does not exist".
        if exc.response.get("Error", {}).get("Code") == "ValidationError":
            raise StackRefusedError(f"stack {stack_name!r} does not exist") from exc
        raise
    stack = stacks[0]
    if own_stack in (stack.get("StackName"), stack.get("StackId")):
        raise StackRefusedError(f"{stack_name!r} is Autopilot's own stack")
    tags = {tag.get("Key"): tag.get("Value") for tag in stack.get("Tags", [])}
    if tags.get(tag_key) != cluster_name:
        raise StackRefusedError(
            f"stack {stack_name!r} is not tagged {tag_key}={cluster_name}: only a stack made for "
            "this cluster can be deleted with it"
        )
