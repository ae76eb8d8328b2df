"""CostTaggerFunction: cost tags that stay true (autopilot.logic.cost_tags).

Three callers: the Create workflow's Tag Cluster step (``{"action": "tag-cluster"}``), the Cleanup
workflow's Release Project Budget step (``{"action": "release-project-budget"}``), and the schedule
``CostTagScheduleExpression`` (an EventBridge Scheduled Event: the drift sweep).
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, NamedTuple

from autopilot.dal.cost_tags import TagRepairRecords
from autopilot.dal.state_store import StateStore
from autopilot.dal.state_table import StateTable
from autopilot.logic.cost_tags import (
    CostTagClients,
    release_project_budget,
    report_warnings,
    sweep,
    tag_cluster,
)
from autopilot.models.cost_allocation import CostTagKeys
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import Count, count, logger, metrics
from autopilot.settings import cost_tagger_settings
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel


class _Request(BaseModel):
    # Built on the first workflow request, not at init (the schedule's sweeps validate none), as every
    # model of the layer is (docs/operations.md, "Cold start").
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )

    cluster_name: str = Field(min_length=1)


class TagClusterRequest(_Request):
    action: Literal["tag-cluster"]


class ReleaseProjectBudgetRequest(_Request):
    action: Literal["release-project-budget"]


WorkflowRequest = TypeAdapter[TagClusterRequest | ReleaseProjectBudgetRequest](
    Annotated[TagClusterRequest | ReleaseProjectBudgetRequest, Field(discriminator="action")],
    config=ConfigDict(defer_build=True),
)


class Deps(NamedTuple):
    keys: CostTagKeys
    clients: CostTagClients  # each made on its first call
    store: StateStore
    repairs: TagRepairRecords


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    settings = cost_tagger_settings()
    return Deps(
        keys=settings.cost_tag_keys,
        clients=CostTagClients(),
        store=StateTable(settings.state_table_name),
        repairs=TagRepairRecords(settings.state_table_name),
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    found = deps()
    if "action" not in event:
        # The schedule's time is "now" (the sandbox's clock in the sandbox).
        scheduled = EventBridgeModel.model_validate(event)
        counts = sweep(
            scheduled.time, keys=found.keys, clients=found.clients, store=found.store, repairs=found.repairs
        )
        count(Count.CLUSTER_TAGS_REPAIRED, counts["repaired"])
        count(Count.COST_TAG_CONFLICTS, counts["conflicts"])
        return counts
    request = WorkflowRequest.validate_python(event)
    if isinstance(request, ReleaseProjectBudgetRequest):
        # Budgets live in the function's own account.
        account = context.invoked_function_arn.split(":")[4]
        budget = release_project_budget(
            request.cluster_name, account=account, store=found.store, budgets=found.clients.budgets
        )
        return {"projectBudgetRemoved": budget}
    cluster = found.store.get_cluster(request.cluster_name)
    if cluster is None:
        raise ValueError(f"cluster {request.cluster_name!r} is not registered")
    report = tag_cluster(cluster, keys=found.keys, clients=found.clients, store=found.store)
    return {
        "changes": len(report.changes),
        "shared": report.shared,
        "conflicts": report.conflicts,
        "missing": report.missing,
        "warnings": report_warnings(report),
    }
