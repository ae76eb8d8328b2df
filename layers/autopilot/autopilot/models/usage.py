"""Chargeback's shapes: what a finished Slurm job cost, the monthly totals per Slurm account and user,
the usage report ``GET /clusters/{name}/usage`` answers, and department (Slurm account) budgets.

They live here, not in autopilot.api.models, so that logic/ builds them without importing the API
(issue 22). Money is ``Decimal`` inside and in the state table, a number of cents at the API's edge
(as ``GET /clusters/{name}/cost``). docs/operations.md, "Chargeback", documents the items.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from autopilot.models.records import Time
from autopilot.models.values import MAX_ACCOUNT_BUDGETS, AccountBudgetMap, check_budgets

# "YYYY-MM" (UTC), a real month: the usage report's ``month`` and the totals' key.
MONTH_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])$"
# Percent of a department's monthly budget at which its one alert per threshold and month goes out.
ACCOUNT_BUDGET_THRESHOLDS = (50, 80, 100)
# The usage report's line of the capacity no job used (never a Slurm account: the name has spaces).
UNUSED_LINE = "(unused capacity)"


def job_ref(job_id: str, start: datetime) -> str:
    """What counts a finished job once: its Slurm id and its start (epoch seconds) — a Slurm whose
    state was lost restarts its job ids, and a new job must not be taken for an old one."""
    return f"{job_id}@{int(start.timestamp())}"


class UsageBy(StrEnum):
    """What the usage report's lines are per."""

    ACCOUNT = "account"
    USER = "user"


class _Camel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class MonthShare(_Camel):
    """What one job cost within one calendar month (UTC)."""

    usd: Decimal
    gpu_hours: Decimal


class JobCost(_Camel):
    """One finished job, priced: its month shares add up to its cost (a job running over a month's end
    is split by time). ``unpriced_nodes``: nodes of the job whose instance type or price was unknown
    when it was reported (the node was gone from ListClusterNodes, or its type has no list price); they
    add nothing, and the job counts as partly priced."""

    job_id: str
    account: str
    user: str
    partition: str = ""
    node_count: int
    gpus: int
    # the state table holds them as records.iso text (dal/usage.py)
    start: Time
    end: Time
    state: str
    usd: Decimal
    gpu_hours: Decimal
    months: dict[str, MonthShare]
    # the month the job ended in: the one whose job count it adds to
    ended_month: str
    unpriced_nodes: list[str] = Field(default_factory=list)

    @property
    def ref(self) -> str:
        """models/usage.py job_ref: the key that counts it once."""
        return job_ref(self.job_id, self.start)


class UsageTotals(_Camel):
    """One (Slurm account, user) pair's totals in one month of one cluster: the state-table item
    ``CLUSTER#<name>`` / ``USAGE#<YYYY-MM>#<account>#<user>`` every job of the pair ADDs to."""

    account: str
    user: str
    month: str
    usd: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    jobs: int = 0
    # jobs with a node that could not be priced (JobCost.unpriced_nodes): their cost is short
    unpriced_jobs: int = 0


# --- the API's shapes ------------------------------------------------------------------------------


class _Api(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class UsageLine(_Api):
    """One line of the usage report: a Slurm account, a user, or the capacity nobody used."""

    name: str = Field(description=f"The Slurm account or user; `{UNUSED_LINE}` for the capacity no job used.")
    usd: float = Field(description="USD at on-demand list prices, to the cent.")
    gpu_hours: float = Field(description="GPU-hours allocated to its jobs (0 on the unused line).")
    jobs: int = Field(description="Jobs that ended in the month (0 on the unused line).")
    percent: float = Field(description="Share of the report's total USD, in percent.")
    budget_usd: float | None = Field(
        default=None, description="The account's monthly budget (by=account, when it has one)."
    )


class UsageView(_Api):
    """GET /clusters/{name}/usage."""

    cluster_name: str
    month: str = Field(description="YYYY-MM (UTC).")
    by: UsageBy
    lines: list[UsageLine] = Field(description="Largest first; the unused capacity last.")
    jobs_usd: float = Field(description="What the month's jobs cost, all lines but the unused one.")
    cluster_spend_usd: float = Field(
        description="The cluster's month-to-date spend as the spend meter last computed it (0 before its "
        "first run in the month)."
    )
    total_usd: float = Field(description="The lines' sum: the cluster's spend, or the jobs' cost if more.")
    as_of: Time | None = Field(description="When the spend meter last ran in the month; null before.")
    warnings: list[str] = Field(
        default_factory=list,
        description="Why the lines may not add up to the cluster's spend (jobs costing more than the meter "
        "counted, nodes that could not be priced).",
    )


class AccountBudgetsBody(_Api):
    """PUT /clusters/{name}/account-budgets: the cluster's department budgets, all of them (replaced)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        json_schema_extra={"examples": [{"accountBudgets": {"physics": 5000, "chemistry": 1200}}]},
    )

    account_budgets: AccountBudgetMap = Field(
        max_length=MAX_ACCOUNT_BUDGETS,
        description="USD a month per Slurm account; {} removes them all. Crossing 50/80/100 % of one in a "
        "month publishes one alert per threshold on the alerts topic.",
    )

    @field_validator("account_budgets")
    @classmethod
    def _budgets(cls, budgets: AccountBudgetMap) -> AccountBudgetMap:
        return check_budgets(budgets)


class AccountBudgetsView(_Api):
    """The cluster's department budgets after the change."""

    cluster_name: str
    account_budgets: dict[str, float]


class TopUser(_Camel):
    user: str
    usd: Decimal
    gpu_hours: Decimal
    jobs: int


class AccountBudgetAlert(_Camel):
    """The one alert on the alerts topic per (cluster, Slurm account, month, threshold) when the
    account's jobs cross that percent of its monthly budget (as BudgetAlert does for a cluster budget)."""

    kind: str = "AccountBudgetThresholdCrossed"
    summary: str
    cluster_name: str
    owner: str | None = None
    project: str | None = None
    account: str
    month: str
    threshold_percent: int
    spend_usd: Decimal
    budget_usd: Decimal
    percent_of_budget: Decimal
    # the account's users by spend this month, largest first (at most TOP_USERS)
    top_users: list[TopUser]
    # the jobs Slurm runs on the cluster now (the agent's latest node report): who keeps spending
    running_jobs: list[str]
    running_job_count: int


TOP_USERS = 5
RUNNING_JOBS_LISTED = 50
