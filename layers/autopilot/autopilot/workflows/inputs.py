"""The inputs of the Create and Cleanup workflows (statemachines/*.asl.json read them as ``$input``).

Only what the workflow cannot know itself: the deadlines and the fallback poll interval are template
parameters the state machines get through DefinitionSubstitutions, not input.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WorkflowModel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class BudgetSubscriber(BaseModel):
    SubscriptionType: str
    Address: str


class WorkflowBudget(WorkflowModel):
    budget_name: str
    limit_amount: str
    cost_filter: str
    subscribers: list[BudgetSubscriber]


class CreateClusterWorkflowInput(WorkflowModel):
    """The Create workflow's input; ``create_cluster_request`` goes to CreateCluster as it is."""

    operation_id: str
    cluster_name: str
    create_cluster_request: dict[str, Any]
    cost_tags: list[dict[str, str]]
    budget: WorkflowBudget | None
    # The project's shared budget, created unless it exists (autopilot.logic.create_cluster).
    project_budget: WorkflowBudget | None = None
    rollback_on_failure: bool


class CleanupClusterWorkflowInput(WorkflowModel):
    """The Cleanup workflow's input. ``stack_name``: a stack tagged ClusterName=<cluster> to delete."""

    operation_id: str
    cluster_name: str
    budget_name: str
    stack_name: str | None
