"""GET /clusters/{name}/cost: the cluster's spend as the spend meter last computed it.

The API does not price nodes itself (it has no Price List permission and answers within its timeout):
before the meter's first run for the cluster the figures are zeros and ``asOf`` is null, and
afterwards they are at most ``SpendMeterMinutes`` old (docs/operations.md, "Spend meter"). Figures of
an earlier month are not this month's: its month to date is 0 until the meter runs in it.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from autopilot.dal.spend import SpendTable
from autopilot.logic.read_access import readable_cluster
from autopilot.logic.spend_meter import forecast, month_of
from autopilot.models.bodies import CostView

if TYPE_CHECKING:
    from autopilot.dal.spend import SpendStore
    from autopilot.logic.dependencies import Dependencies


def _cents(amount: Decimal) -> float:
    return float(amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def read_cost(
    deps: Dependencies, name: str, *, caller: str | None = None, spend: SpendStore | None = None
) -> CostView:
    cluster = readable_cluster(deps, name, caller)
    meter = (spend or SpendTable(deps.settings.state_table_name)).latest_meter(name)
    budget = Decimal(cluster.budget_limit_usd) if cluster.budget_limit_usd else None
    if meter is None:
        return CostView(
            hourly_rate_usd=0.0,
            month_to_date_usd=0.0,
            forecast_usd=0.0,
            budget_usd=None if budget is None else _cents(budget),
            as_of=None,
        )
    now = deps.now()
    if meter.month < month_of(now):  # "YYYY-MM" sorts as the months do
        # The meter's last run was in an earlier month (the new month's first run is not due yet, or
        # the cluster is metered no more): nothing of it is this month's; the rate is the last known.
        month_to_date, forecast_usd = Decimal(0), forecast(Decimal(0), meter.hourly_rate_usd, now)
    else:
        month_to_date, forecast_usd = meter.month_to_date_usd, meter.forecast_usd
    return CostView(
        hourly_rate_usd=_cents(meter.hourly_rate_usd),
        month_to_date_usd=_cents(month_to_date),
        forecast_usd=_cents(forecast_usd),
        budget_usd=None if budget is None else _cents(budget),
        as_of=meter.as_of,
    )
