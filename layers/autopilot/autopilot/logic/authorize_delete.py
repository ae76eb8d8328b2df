"""Who may delete a cluster, and which stack a delete may take with it (DELETE /clusters/{name}).

A cluster may be deleted by the identity that created it, its ``owners`` and the stack's
AdminPrincipalArns, each matched as logic/callers.py says: an IAM user or an Identity Center session
is one person, any other role's sessions are one principal (``assumed-role/R/any-session`` is role
``R``) unless OwnerMatching=session. ``?stackName=`` may
name only a CloudFormation stack tagged ``ClusterName`` = the cluster, and never Autopilot's own.
The same principals may act on the cluster's nodes and its healing switch (``action``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from autopilot.logic.callers import OwnerMatching, acts_as_any

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


class NotAllowedError(Exception):
    """The caller may not do this to the cluster."""


class StackRefusedError(Exception):
    """The stack named by ``stackName`` may not be deleted with the cluster."""


def authorize_delete(
    cluster_name: str,
    caller: str | None,
    created_by: str | None,
    admins: Iterable[str],
    *,
    action: str = "delete",
    matching: OwnerMatching = "role",
    owners: Iterable[str] | None = None,
) -> None:
    """Raise NotAllowedError unless ``caller`` created the cluster, is one of its ``owners`` or an
    admin. A cluster with no recorded creator (created outside Autopilot, or before creators were
    recorded) is the admins'. ``action`` words the refusal ("may not <action> cluster 'c'")."""
    allowed = [*admins, *([created_by] if created_by is not None else []), *(owners or [])]
    if not acts_as_any(caller, allowed, matching=matching):
        raise NotAllowedError(
            f"{caller or 'an unidentified caller'} may not {action} cluster {cluster_name!r}: only the "
            "identity that created it, its owners and the stack's AdminPrincipalArns may"
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
