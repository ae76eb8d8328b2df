"""The inputs of the Create, Cleanup and ReplaceNode workflows (statemachines/*.asl.json read them as
``$input``).

Only what the workflow cannot know itself: the create / delete deadlines and the fallback poll interval
are template parameters the state machines get through DefinitionSubstitutions, not input. A repair's
deadlines are input: the code that starts it reads them from its own settings.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from autopilot.models.records import Fault, NodeAction, RepairTrigger


class WorkflowModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class BudgetSubscriber(BaseModel):
    model_config = ConfigDict(defer_build=True)

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
    # The cluster's login target groups: registered once it is InService (Register Login Targets).
    login_target_group_arns: list[str] = []


class CleanupClusterWorkflowInput(WorkflowModel):
    """The Cleanup workflow's input. ``stack_name``: a stack tagged ClusterName=<cluster> to delete."""

    operation_id: str
    cluster_name: str
    budget_name: str
    stack_name: str | None


class RepairDeadlines(WorkflowModel):
    """Seconds each action may take from its start: RebootDeadlineMinutes, ReplaceDeadlineMinutes,
    HyperPodRepairDeadlineMinutes (a repair also waits at most ``replace_seconds`` for a slot)."""

    reboot_seconds: int = Field(ge=1)
    replace_seconds: int = Field(ge=1)
    hyperpod_seconds: int = Field(ge=1)


class ReplaceNodeWorkflowInput(WorkflowModel):
    """The ReplaceNode workflow's input (statemachines/replace_node.asl.json): one node per execution,
    the first action as autopilot.logic.healing.decide chose it."""

    operation_id: str
    cluster_name: str
    node_id: str
    action: NodeAction
    trigger: RepairTrigger
    fault: Fault | None = None
    deadlines: RepairDeadlines
    # False for a node that may only be rebooted (a login node without AllowLoginReplace): a reboot
    # that does not heal it is alerted instead of escalated to a replace.
    allow_replace: bool = True
    # The fault already took the node's GPUs (autopilot.logic.healing.decide.gpus_lost): a Slurm-aware
    # repair does not wait for the node's jobs to end (they cannot run on), it requeues them at once.
    gpus_lost: bool = False
