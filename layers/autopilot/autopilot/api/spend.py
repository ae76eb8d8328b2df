"""Routes of what a cluster costs and who spent it: its spend, its usage by Slurm account or user, the
department budgets on that usage, and lifting the growth block its budget set."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from autopilot.api import wiring
from autopilot.api.parameters import CLUSTER_NAME, caller
from autopilot.api.responses import responses
from autopilot.models.bodies import (
    CostView,
    GrowthBlockLifted,
)
from autopilot.models.usage import MONTH_PATTERN, AccountBudgetsBody, AccountBudgetsView, UsageBy, UsageView

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)


@router.get(
    "/clusters/<name>/cost",
    summary="A cluster's spend",
    description="Hourly rate, month-to-date spend and forecast to the month's end at on-demand list "
    "prices, as the spend meter last computed them (every SpendMeterMinutes); zeros and `asOf` null "
    "before its first run. An estimate: no discounts, savings plans or reserved capacity, no storage or "
    "data transfer.",
    tags=["clusters"],
    operation_id="getClusterCost",
    responses=responses(HTTPStatus.OK, CostView, "The cluster's spend.", HTTPStatus.NOT_FOUND),
)
def get_cluster_cost(name: CLUSTER_NAME) -> CostView:
    from autopilot.logic.read_cost import read_cost  # noqa: PLC0415  (first use)

    return read_cost(wiring.deps(), name, caller=caller(router))


@router.get(
    "/clusters/<name>/usage",
    summary="What each Slurm account or user spent on a cluster",
    description="One line per Slurm account (`by=account`) or user (`by=user`) of the month's finished jobs, "
    "each priced at the list prices of the nodes it held while it ran (a node's price shared by its GPUs), "
    "as the cluster's Slurm agent reported them; then the capacity no job used: the spend meter's "
    "month-to-date spend of the cluster less the jobs' cost, so the lines add up to the cluster's spend "
    "(`GET /clusters/{name}/cost`). Never negative: when the jobs cost more than the meter counted, "
    "`warnings` says by how much. `month` defaults to the current one (UTC).",
    tags=["clusters"],
    operation_id="getClusterUsage",
    responses=responses(HTTPStatus.OK, UsageView, "The month's usage.", HTTPStatus.NOT_FOUND),
)
def get_cluster_usage(
    name: CLUSTER_NAME,
    by: Annotated[UsageBy, Query(description="Lines per Slurm account or per user")] = UsageBy.ACCOUNT,
    month: Annotated[
        str | None, Query(pattern=MONTH_PATTERN, description="YYYY-MM (UTC); the current month by default")
    ] = None,
) -> UsageView:
    from autopilot.logic.usage_report import read_usage  # noqa: PLC0415  (first use)

    return read_usage(wiring.deps(), name, by=by, month=month, caller=caller(router))


@router.put(
    "/clusters/<name>/account-budgets",
    summary="Set a cluster's department budgets",
    description="Replaces the cluster's budgets per Slurm account (USD a month; `{}` removes them). When an "
    "account's jobs on the cluster (as `GET /clusters/{name}/usage` counts them) cross 50, 80 and 100 % "
    "of its budget in a month, one alert per threshold goes to the alerts topic: the account, its spend "
    "and budget, its top users and the jobs Slurm runs. Allowed to the cluster's creator, its owners and "
    "the stack's AdminPrincipalArns (403 otherwise).",
    tags=["clusters"],
    operation_id="setClusterAccountBudgets",
    responses=responses(
        HTTPStatus.OK,
        AccountBudgetsView,
        "The cluster's department budgets.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
    ),
)
def put_account_budgets(
    name: CLUSTER_NAME, body: Annotated[AccountBudgetsBody, Body()]
) -> AccountBudgetsView:
    from autopilot.logic.account_budgets import set_account_budgets  # noqa: PLC0415  (first use)

    return set_account_budgets(wiring.deps(), name, body.account_budgets, requested_by=caller(router))


@router.delete(
    "/clusters/<name>/growth-block",
    summary="Lift a cluster's growth block",
    description="A cluster whose budget enforcement is `block-growth` refuses scale-ups from 100 % of its "
    "budget (ACTUAL) until the next budget period; an AdminPrincipalArns principal may lift the block "
    "earlier (403 for anyone else). Lifting a cluster that is not blocked changes nothing.",
    tags=["clusters"],
    operation_id="liftGrowthBlock",
    responses=responses(
        HTTPStatus.OK,
        GrowthBlockLifted,
        "The cluster may grow again.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
    ),
)
def lift_growth_block(name: CLUSTER_NAME) -> GrowthBlockLifted:
    from autopilot.logic import lift_growth_block as use_case  # noqa: PLC0415  (first use)

    return use_case.lift_growth_block(wiring.deps(), name, caller=caller(router))
