"""The spend meter's records: a cluster's figures for one month, and a cached list price.

Field names are the state table's attribute names (camelCase aliases); docs/operations.md, "Spend
meter", documents the items. Money is ``Decimal`` (DynamoDB numbers), never float.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class _Item(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class SpendMeter(_Item):
    """One cluster's spend in one calendar month (UTC), as of the meter's last run."""

    cluster_name: str
    # "YYYY-MM" (UTC): the month the figures belong to
    month: str
    as_of: datetime
    hourly_rate_usd: Decimal
    month_to_date_usd: Decimal
    forecast_usd: Decimal
    budget_usd: Decimal | None = None
    project: str | None = None
    # thresholds (percent of the budget) the forecast has been alerted for this month
    alerted: set[int] = Field(default_factory=set)
    # instance types running without a list price (not in the figures; logged as an error)
    unpriced: list[str] = Field(default_factory=list)


class ListPrice(_Item):
    """The on-demand list price of one instance type's HyperPod usage in one region."""

    region: str
    instance_type: str
    usd_per_hour: Decimal
    fetched_at: datetime
