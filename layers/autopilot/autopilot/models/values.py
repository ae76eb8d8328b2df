"""Values the API's bodies share with the records and the use cases: the Slurm agent's state, a
cluster's budget enforcement, the department budgets' rule. No model class here: a body naming one of
them imports no module of models for it (the agent's reports, the budget alerts and the usage report
are ~25 model classes a request for a cluster does not need; docs/operations.md, "Cold start").
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Strict

# The Slurm agent on a cluster's controller, as GET /clusters/{name} shows it (logic/agent/status.py).
AgentState = Literal["connected", "silent", "absent"]


class BudgetEnforcement(StrEnum):
    """What Autopilot does when a cluster's ACTUAL spend crosses 100 % of its budget."""

    ALERT = "alert"
    # UpdateCluster: every worker group to its configured minimum (controller and login untouched).
    SCALE_TO_MIN = "scale-to-min"
    # The API refuses scale-ups until the next budget period or an admin lifts the block.
    BLOCK_GROWTH = "block-growth"


# A Slurm account or user name as sacct / the job completion log print them.
SLURM_NAME = r"^[A-Za-z0-9_][A-Za-z0-9._@-]{0,127}$"
# A department budget is USD a month: more than nothing, less than any real budget's limit.
MAX_ACCOUNT_BUDGET_USD = 1_000_000_000
# One cluster's Slurm accounts with a budget (each is a key of the cluster's registry item).
MAX_ACCOUNT_BUDGETS = 200
# USD a month per Slurm account: a JSON number only (strict: ``true`` is not $1)
AccountBudgetMap = dict[str, Annotated[float, Strict()]]


def check_budgets(budgets: dict[str, float]) -> dict[str, float]:
    """Department budgets as PUT /clusters/{name}/account-budgets takes them (a ValueError names the
    account)."""
    for account, usd in budgets.items():
        if not re.fullmatch(SLURM_NAME, account):
            raise ValueError(f"{account!r} is not a Slurm account name")
        if not 0.01 <= usd <= MAX_ACCOUNT_BUDGET_USD:  # a cent at least: it is stored to the cent
            raise ValueError(
                f"the budget of {account!r} must be at least 0.01 and at most {MAX_ACCOUNT_BUDGET_USD}"
            )
    return budgets


def check_account_budgets(budgets: AccountBudgetMap | None) -> AccountBudgetMap | None:
    """POST /clusters' ``accountBudgets``, checked as the PUT's (a ValueError names the account)."""
    return None if budgets is None else check_budgets(budgets)


def stored_budgets(budgets: AccountBudgetMap) -> dict[str, str]:
    """The registry's form: USD to the cent as text ("5000.00"), as the cluster's budgetLimitUsd. Here,
    not with the usage models: a create stores its department budgets without importing them (~25 ms of
    the first POST /clusters)."""
    return {account: f"{Decimal(str(usd)):.2f}" for account, usd in sorted(budgets.items())}
