"""Project budgets have an owner (autopilot.logic.project_budget), through POST /clusters on the template
deployed into moto: another owner's create may not change the terms of a project's budget (409 naming
the fields); it may join the project; the owner's own other terms are a warning."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

from typing import Any

from autopilot.dal.state_table import StateTable
from autopilot.models.records import ClusterStatus

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import call, stack

MALLORY = "arn:aws:iam::123456789012:user/mallory"
ANN = "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Researcher_0123456789abcdef/ann"
BOB = "arn:aws:sts::123456789012:assumed-role/AWSReservedSSO_Researcher_0123456789abcdef/bob"


def create(
    name: str, caller: str, budget: dict[str, Any] | None, *, dry_run: bool = False
) -> tuple[int, Any]:
    body = create_body(name, project="vision", budget=budget)
    body["clusterConfig"]["Tags"] = [{"Key": "project", "Value": "vision"}]
    event = api_event("create_cluster", body=body, query={"dryRun": "true"} if dry_run else None)
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


SQUAT = {"projectMonthlyLimitUsd": 99_999_999, "alertEmails": ["mallory@example.com"]}
REAL = {"projectMonthlyLimitUsd": 5000, "alertEmails": ["ann@example.com"]}


def test_another_owners_terms_for_a_projects_budget_are_refused_naming_the_fields(stack: Deployed) -> None:
    # issue 20: mallory's $99,999,999 budget for "vision" came first; ann's $5,000 was silently ignored
    assert create("squat", MALLORY, SQUAT)[0] == 202

    for dry_run in (True, False):
        status, answer = create("vision-1", ANN, REAL, dry_run=dry_run)

        assert status == 409, answer
        assert "belongs to arn:aws:iam::123456789012:user/mallory" in answer["message"]
        assert [e["path"] for e in answer["errors"]] == [
            "budget.projectMonthlyLimitUsd",
            "budget.alertEmails",
        ]
        assert "99999999.00 USD" in answer["errors"][0]["message"]
    table = StateTable(stack.stack.physical_id("StateTable"), stack.client("dynamodb"))
    assert table.get_cluster("vision-1") is None


def test_another_owner_joins_the_project_without_asking_for_its_budget_or_with_its_terms(
    stack: Deployed,
) -> None:
    assert create("first", ANN, REAL)[0] == 202

    assert create("joins", MALLORY, {"monthlyLimitUsd": 100})[0] == 202
    assert create("same-terms", MALLORY, {**REAL, "alertEmails": ["ANN@example.com"]})[0] == 202
    # an Identity Center user is a person: bob is not ann, though both sign as one role
    assert create("bob", BOB, {**REAL, "projectMonthlyLimitUsd": 7000})[0] == 409


def test_the_owner_may_ask_again_with_other_terms_and_is_told_they_stay(stack: Deployed) -> None:
    assert create("first", ANN, REAL)[0] == 202

    status, answer = create("second", ANN, {**REAL, "projectMonthlyLimitUsd": 6000})

    assert status == 202, answer
    assert [(w["path"], w["message"]) for w in answer["warnings"]] == [
        (
            "budget.projectMonthlyLimitUsd",
            "project 'vision' has a budget of 5000.00 USD: it keeps its terms (set by cluster 'first')",
        )
    ]


def test_once_the_owners_clusters_are_gone_another_owner_sets_the_terms(stack: Deployed) -> None:
    assert create("squat", MALLORY, SQUAT)[0] == 202
    table = StateTable(stack.stack.physical_id("StateTable"), stack.client("dynamodb"))
    squat = table.get_cluster("squat")
    assert squat is not None
    assert (squat.project_budget_limit_usd, squat.project_budget_emails) == (
        "99999999.00",
        ["mallory@example.com"],
    )
    stack.client("dynamodb").update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": "CLUSTER#squat"}, "sk": {"S": "CLUSTER#squat"}},
        UpdateExpression="SET #s = :failed",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":failed": {"S": ClusterStatus.CREATE_FAILED.value}},
    )

    assert create("vision-1", ANN, REAL)[0] == 202
