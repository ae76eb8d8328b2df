"""DELETE /clusters/{name}/growth-block: an admin lets a cluster grow again before its budget period ends.

Its own module, apart from the enforcement rules (logic/budget_enforcement.py), so that
BudgetAlertsFunction, which only applies the block, does not import the API's response models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.dal.budget_alerts import BudgetAlertTable
from autopilot.errors import NotFoundError
from autopilot.logic.authorize_delete import NotAllowedError
from autopilot.logic.budget_enforcement import growth_blocked
from autopilot.logic.callers import acts_as_any
from autopilot.models.bodies import GrowthBlockLifted

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies


def lift_growth_block(
    deps: Dependencies, name: str, *, caller: str | None, table: BudgetAlertTable | None = None
) -> GrowthBlockLifted:
    """DELETE /clusters/{name}/growth-block: an AdminPrincipalArns principal lets the cluster grow again
    before the budget period ends (403 for anyone else; 404 for a cluster Autopilot does not know)."""
    cluster = deps.store.get_cluster(name)
    if cluster is None:
        raise NotFoundError(f"cluster {name!r} not found")
    if not acts_as_any(caller, deps.settings.admin_principal_arns, matching=deps.settings.owner_matching):
        raise NotAllowedError(
            f"{caller or 'an unidentified caller'} may not lift the growth block of cluster {name!r}: "
            "only the stack's AdminPrincipalArns may"
        )
    was_blocked = growth_blocked(cluster, deps.now())
    (table or BudgetAlertTable(deps.settings.state_table_name)).lift_growth_block(name)
    return GrowthBlockLifted(cluster_name=name, growth_blocked=False, was_blocked=was_blocked)
