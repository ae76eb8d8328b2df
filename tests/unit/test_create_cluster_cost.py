"""What POST /clusters hands the Create workflow for cost (autopilot.logic.create_cluster): the stack's
default budget or none, a project budget, the cost center and file systems, in the workflow's input and
the cluster's record."""

from __future__ import annotations

import json
from typing import Any

from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.logic.create_cluster import create_cluster
from autopilot.models.bodies import CreateClusterBody
from autopilot.models.cost_allocation import CostTagKeys
from autopilot.settings import ApiSettings

from tests.samples import create_body
from tests.unit.test_use_cases import SETTINGS, FakeStepFunctions, dependencies


def _accept(settings: ApiSettings, **changes: Any) -> tuple[InMemoryStateStore, dict[str, Any]]:
    store, sfn = InMemoryStateStore(), FakeStepFunctions()
    deps = dependencies(store, sfn)
    deps.settings = settings
    create_cluster(
        deps, CreateClusterBody.model_validate(create_body(**changes)), requested_by="arn:aws:iam::1:user/a"
    )
    [started] = sfn.started
    return store, json.loads(started["input"])


def test_a_request_without_budget_gets_the_stacks_default_budget() -> None:
    settings = SETTINGS.model_copy(update={"default_monthly_budget_usd": 500})

    store, workflow_input = _accept(settings, budget=None)

    assert workflow_input["budget"]["budgetName"] == "hyperpod-ml-cluster"
    assert workflow_input["budget"]["limitAmount"] == "500.00"
    assert [s["SubscriptionType"] for s in workflow_input["budget"]["subscribers"]] == ["SNS"]
    assert workflow_input["projectBudget"] is None
    assert store.clusters["ml-cluster"].budget_name == "hyperpod-ml-cluster"


def test_no_default_budget_means_none() -> None:
    store, workflow_input = _accept(SETTINGS, budget=None)

    assert workflow_input["budget"] is None
    assert store.clusters["ml-cluster"].budget_name is None


def test_a_project_budget_cost_center_and_file_systems_reach_the_workflow_and_the_record() -> None:
    settings = SETTINGS.model_copy(update={"cost_tag_keys": CostTagKeys(cost_center="CostCenter")})

    store, workflow_input = _accept(
        settings,
        costCenter="cc-42",
        budget={"projectMonthlyLimitUsd": 9000, "alertEmails": ["a@example.com"]},
    )

    assert workflow_input["budget"] is None  # no cluster limit, no default
    assert workflow_input["projectBudget"] == {
        "budgetName": "hyperpod-project.llm-pretraining",
        "limitAmount": "9000.00",
        "costFilter": "user:project$llm-pretraining",
        "subscribers": [
            {"SubscriptionType": "SNS", "Address": SETTINGS.budget_notifications_topic_arn},
            {"SubscriptionType": "EMAIL", "Address": "a@example.com"},
        ],
    }
    assert {"Key": "CostCenter", "Value": "cc-42"} in workflow_input["costTags"]
    assert {"Key": "CostCenter", "Value": "cc-42"} in workflow_input["createClusterRequest"]["Tags"]
    cluster = store.clusters["ml-cluster"]
    assert cluster.cost_center == "cc-42"
    assert cluster.file_system_ids == ["fs-0123456789abcdef0"]
