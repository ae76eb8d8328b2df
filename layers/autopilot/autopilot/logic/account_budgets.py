"""PUT /clusters/{name}/account-budgets: replace a cluster's department budgets (USD a month per Slurm
account; ``POST /clusters`` sets the first ones as ``accountBudgets``).

Allowed to whoever may delete the cluster (its creator, its owners, the stack's admins), as every
other write; any cluster Autopilot manages, whatever its status. The budgets are the registry item's
``accountBudgets``; crossing 50/80/100 % of one is alerted by logic/account_budget_alerts.py. A budget
changed mid-month is compared with the whole month's spend at the next report: a lowered budget the
account has already crossed alerts then (each threshold still once a month).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autopilot.dal.usage import UsageTable
from autopilot.errors import NotFoundError
from autopilot.logic.authorize_delete import authorize_delete
from autopilot.models.records import ClusterStatus
from autopilot.models.usage import AccountBudgetsView
from autopilot.models.values import AccountBudgetMap, stored_budgets
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.dal.usage import UsageStore
    from autopilot.logic.dependencies import Dependencies


def set_account_budgets(
    deps: Dependencies,
    name: str,
    budgets: AccountBudgetMap,
    *,
    requested_by: str | None,
    usage: UsageStore | None = None,
) -> AccountBudgetsView:
    cluster = deps.store.get_cluster(name)
    if cluster is None or cluster.status is ClusterStatus.DELETED:
        raise NotFoundError(f"cluster {name!r} not found")
    authorize_delete(
        name,
        requested_by,
        cluster.created_by,
        deps.settings.admin_principal_arns,
        action="set the account budgets of",
        matching=deps.settings.owner_matching,
        owners=cluster.owners,
    )
    stored = stored_budgets(budgets)
    usage = usage or UsageTable(deps.settings.state_table_name)
    if not usage.set_account_budgets(name, stored, updated_at=deps.now()):
        raise NotFoundError(f"cluster {name!r} not found")
    logger.info("account budgets set", cluster=name, accounts=sorted(stored), by=requested_by)
    return AccountBudgetsView(cluster_name=name, account_budgets={a: float(v) for a, v in stored.items()})
