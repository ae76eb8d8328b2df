"""Who owns a project's shared budget, and which creates may not change its terms (POST /clusters).

A project's budget (``hyperpod-project.<project>``) is created by the Create workflow of the first
cluster that asks for one, and an existing budget is kept as it is: the later requests' limits and
e-mails would be silently ignored. So the first live cluster of the project that asked for a budget
holds its terms (``projectBudgetLimitUsd``, ``projectBudgetEmails`` on its record), and its creator owns
it. A create by another person (autopilot.logic.callers: an Identity Center user, an IAM user, else
the role) that asks for other terms is refused with 409 naming the field; asking for the same terms,
or for no project budget, joins the project. The owner's own later request with other terms is
accepted with a warning (the budget keeps its terms). Two first creates racing each other both pass
this check: the workflow that creates the budget first sets it, as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING

from autopilot.dal.state_store import every_cluster
from autopilot.errors import ConflictError
from autopilot.logic.callers import OwnerMatching, acts_as
from autopilot.models.error_body import ErrorDetail
from autopilot.models.records import Cluster, ClusterStatus

if TYPE_CHECKING:
    from autopilot.dal.state_store import StateStore
    from autopilot.models.bodies import CreateClusterBody

# A cluster in these states may still use the project's budget (logic/cost_tags.KEEPS_PROJECT_BUDGET).
_HOLDS = frozenset({ClusterStatus.CREATING, ClusterStatus.ACTIVE, ClusterStatus.DELETE_FAILED})


class ProjectBudgetTakenError(ConflictError):
    """Another owner's project budget already has other terms than the request asks for."""


def budget_holder(clusters: Iterable[Cluster], project: str) -> Cluster | None:
    """The project's first live cluster that asked for a project budget (its terms are the budget's)."""
    holders = [
        c
        for c in clusters
        if c.project == project and c.status in _HOLDS and c.project_budget_limit_usd is not None
    ]
    return min(holders, key=lambda c: (c.created_at, c.cluster_name), default=None)


def requested_terms(body: CreateClusterBody) -> tuple[str, list[str]] | None:
    """The project budget the request asks for: its limit ("9000.00") and e-mails; None when none."""
    if body.budget is None or body.budget.project_monthly_limit_usd is None:
        return None
    return f"{Decimal(str(body.budget.project_monthly_limit_usd)):.2f}", list(body.budget.alert_emails)


def check_project_budget(
    store: StateStore, body: CreateClusterBody, caller: str | None, *, matching: OwnerMatching
) -> list[ErrorDetail]:
    """Raise ProjectBudgetTakenError when another owner's project budget has other terms; the warnings
    of a request the budget will not follow (its owner's own, with other terms)."""
    terms = requested_terms(body)
    if terms is None:
        return []
    holder = budget_holder(every_cluster(store), body.project)
    if holder is None:
        return []
    limit, emails = terms
    differ: list[ErrorDetail] = []
    if limit != holder.project_budget_limit_usd:
        differ.append(
            ErrorDetail(
                path="budget.projectMonthlyLimitUsd",
                location="body",
                message=f"project {body.project!r} has a budget of {holder.project_budget_limit_usd} USD",
            )
        )
    if sorted(e.lower() for e in emails) != sorted(e.lower() for e in holder.project_budget_emails or []):
        differ.append(
            ErrorDetail(
                path="budget.alertEmails",
                location="body",
                message=f"project {body.project!r}'s budget alerts other e-mail addresses",
            )
        )
    if not differ:
        return []
    owner = holder.created_by
    if owner is not None and caller is not None and acts_as(caller, owner, matching=matching):
        kept = f"it keeps its terms (set by cluster {holder.cluster_name!r})"
        return [d.model_copy(update={"message": f"{d.message}: {kept}"}) for d in differ]
    raise ProjectBudgetTakenError(
        f"project {body.project!r}'s budget belongs to {owner or 'another owner'} (set by cluster "
        f"{holder.cluster_name!r}): another owner may not change its terms; leave "
        "budget.projectMonthlyLimitUsd out to join the project",
        differ,
    )
