"""How Autopilot names what it creates for a cluster's costs: its cost-allocation tags and budgets."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from autopilot_config.models.constraints import is_tag_text
from pydantic import BaseModel, ConfigDict

# Cost-allocation tags Autopilot puts on every cluster (activate them in Billing to see costs by them).
# ClusterName is not configurable: budgets filter on it, Cleanup finds leftovers and may delete stacks
# by it, and IAM conditions name it.
TAG_CLUSTER_NAME = "ClusterName"
TAG_OWNER = "owner"
TAG_PROJECT = "project"
TAG_COST_CENTER = "cost-center"
TAG_OPERATION = "autopilot:operation-id"

# The "." keeps project budgets apart from cluster budgets (hyperpod-<cluster>): a cluster name holds
# only letters, digits and "-", so a cluster named "project-x" cannot take (or delete) project x's.
PROJECT_BUDGET_PREFIX = "hyperpod-project."
_BUDGET_NAME_MAX = 100
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# provisioning-parameters.json names FSx file systems by DNS name: fs-<id>.fsx.<region>.amazonaws.com
_FSX_DNS_NAME = re.compile(r"(fs-[0-9a-f]{8,21})\.fsx\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")


class CostTagKeys(BaseModel):
    """The tag keys of the request's owner, project and cost center (template parameter CostTagKeys)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    owner: str = TAG_OWNER
    project: str = TAG_PROJECT
    cost_center: str = TAG_COST_CENTER


# CostTagKeys spells the fields as the tags are named by default.
_FIELDS = {"owner": "owner", "project": "project", "cost-center": "cost_center"}


def parse_cost_tag_keys(text: str) -> CostTagKeys:
    """``owner=Owner,project=Project,cost-center=CostCenter``: each field's tag key; a field not named
    keeps its default key. Raises ValueError naming what is wrong."""
    keys: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        field, _, key = (s.strip() for s in entry.partition("="))
        if field not in _FIELDS:
            raise ValueError(f"CostTagKeys: unknown field {field!r} (one of {', '.join(_FIELDS)})")
        if not key or len(key) > 128 or not is_tag_text(key) or key.lower().startswith("aws:"):
            raise ValueError(f"CostTagKeys: {key!r} is not a tag key Autopilot may set")
        keys[_FIELDS[field]] = key
    parsed = CostTagKeys(**keys)
    chosen = [TAG_CLUSTER_NAME, parsed.owner, parsed.project, parsed.cost_center]
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"CostTagKeys: the keys must differ from each other and from {TAG_CLUSTER_NAME}")
    return parsed


def cost_tag_set(
    cluster_name: str, *, owner: str | None, project: str | None, cost_center: str | None, keys: CostTagKeys
) -> dict[str, str]:
    """The tags a cluster and the resources it uses carry (a field not given is not tagged)."""
    tags = {TAG_CLUSTER_NAME: cluster_name}
    for key, value in ((keys.owner, owner), (keys.project, project), (keys.cost_center, cost_center)):
        if value:
            tags[key] = value
    return tags


def budget_name_for(cluster_name: str) -> str:
    """The AWS Budget Autopilot creates for a cluster (also what Cleanup deletes)."""
    return f"hyperpod-{cluster_name}"


def project_budget_name_for(project: str) -> str:
    """The AWS Budget shared by a project's clusters. Budget names refuse ':' and '\\' and hold 100
    characters: a project name that is not plain, or too long, is shortened and made unique by a hash."""
    room = _BUDGET_NAME_MAX - len(PROJECT_BUDGET_PREFIX)
    if _SAFE_NAME.fullmatch(project) and len(project) <= room:
        return PROJECT_BUDGET_PREFIX + project
    digest = hashlib.sha256(project.encode()).hexdigest()[:8]
    plain = re.sub(r"[^A-Za-z0-9_.-]", "-", project)[: room - len(digest) - 1]
    return f"{PROJECT_BUDGET_PREFIX}{plain}-{digest}"


def cost_filter(key: str, value: str) -> str:
    """A budget's CostFilters TagKeyValue entry: user-defined tag ``key`` = ``value``."""
    return f"user:{key}${value}"


def file_system_ids(provisioning_parameters: Mapping[str, Any] | None) -> list[str]:
    """The FSx file systems provisioning-parameters.json names (its ``*dns_name`` values)."""
    found: list[str] = []
    for key, value in (provisioning_parameters or {}).items():
        if key.endswith("dns_name") and isinstance(value, str):
            match = _FSX_DNS_NAME.fullmatch(value.strip().lower())
            if match and match[1] not in found:
                found.append(match[1])
    return found
