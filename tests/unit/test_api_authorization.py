"""Least privilege at the API: ExecutionRole names and accounts, who may DELETE, which stack goes with it."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported from test_api and named by the tests)

from __future__ import annotations

from typing import Any

import pytest
from autopilot.logic.authorize_delete import NotAllowedError, authorize_delete
from autopilot.logic.callers import principal

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import (
    USER_ARN,
    as_admin,
    call,
    cluster_stack,
    create,
    executions,
    problems,
    registered_active,
    stack,
)

OTHER_USER = "arn:aws:iam::123456789012:user/mallory"
ROLE = "arn:aws:iam::123456789012:role/sagemaker-hyperpod-execution-role"


def delete(
    name: str = "ml-cluster", *, caller: str = USER_ARN, stack_name: str | None = None
) -> tuple[int, Any]:
    event = api_event(
        "delete_cluster",
        path_parameters={"name": name},
        query={"stackName": stack_name} if stack_name else None,
    )
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


# -- who the caller is ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arn", "acting_as"),
    [
        ("arn:aws:sts::123456789012:assumed-role/Ops/alice", "arn:aws:iam::123456789012:role/Ops"),
        ("arn:aws:iam::123456789012:role/team/Ops", "arn:aws:iam::123456789012:role/Ops"),
        ("arn:aws-cn:sts::123456789012:assumed-role/Ops/x", "arn:aws-cn:iam::123456789012:role/Ops"),
        (OTHER_USER, OTHER_USER),
    ],
)
def test_a_role_session_acts_as_its_role(arn: str, acting_as: str) -> None:
    assert principal(arn) == acting_as


def test_only_the_creator_and_the_admins_may_delete() -> None:
    creator = "arn:aws:sts::123456789012:assumed-role/Ops/alice"
    authorize_delete("c", "arn:aws:sts::123456789012:assumed-role/Ops/other-session", creator, [])
    authorize_delete("c", OTHER_USER, creator, [OTHER_USER])
    authorize_delete(
        "c", "arn:aws:sts::123456789012:assumed-role/Admin/s", None, ["arn:aws:iam::123456789012:role/Admin"]
    )
    for caller, created_by in ((OTHER_USER, creator), (None, creator), (creator, None)):
        with pytest.raises(NotAllowedError):
            authorize_delete("c", caller, created_by, ["arn:aws:iam::123456789012:role/Admin"])


# -- DELETE through the API ------------------------------------------------------------------------------
def test_another_principal_cannot_delete_a_cluster_it_did_not_create(stack: Deployed) -> None:
    registered_active(stack, "ml-cluster")

    status, answer = delete(caller=OTHER_USER)

    assert status == 403
    assert "may not delete cluster 'ml-cluster'" in answer["message"]
    assert executions(stack, "CleanupClusterStateMachine") == []
    _, listed = call(api_event("list_clusters", query=None))
    assert [c["createdBy"] for c in listed["clusters"]] == [USER_ARN]


def test_an_admin_and_another_session_of_the_creators_role_may_delete(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered_active(stack, "ml-cluster")
    registered_active(stack, "other")
    as_admin(monkeypatch, OTHER_USER)

    assert delete("ml-cluster", caller=OTHER_USER)[0] == 202
    assert delete("other", caller="arn:aws:sts::123456789012:assumed-role/ResearcherRole/another")[0] == 202


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ({}, "is not tagged ClusterName=ml-cluster"),
        ({"ClusterName": "someone-elses"}, "is not tagged ClusterName=ml-cluster"),
    ],
)
def test_a_stack_not_tagged_for_the_cluster_is_refused(
    stack: Deployed, tags: dict[str, str], message: str
) -> None:
    registered_active(stack, "ml-cluster")
    cluster_stack(stack, "shared-vpc", tags)

    status, answer = delete(stack_name="shared-vpc")

    assert status == 400
    assert problems(answer) == {("query", "stackName")}
    assert message in answer["errors"][0]["message"]
    assert executions(stack, "CleanupClusterStateMachine") == []


def test_a_missing_stack_and_autopilots_own_stack_are_refused(stack: Deployed) -> None:
    registered_active(stack, "ml-cluster")
    own = stack.environment()["AUTOPILOT_STACK_NAME"]
    # Even tagged for the cluster (a stack-wide tag), Autopilot's own stack never goes with a cluster.
    if not stack.client("cloudformation").describe_stacks()["Stacks"]:
        cluster_stack(stack, own, {"ClusterName": "ml-cluster"})

    assert delete(stack_name="nowhere")[1]["errors"][0]["message"] == "stack 'nowhere' does not exist"
    status, answer = delete(stack_name=own)
    assert (status, problems(answer)) == (400, {("query", "stackName")})
    assert executions(stack, "CleanupClusterStateMachine") == []


def test_a_stack_tagged_for_the_cluster_goes_with_it(stack: Deployed) -> None:
    registered_active(stack, "ml-cluster")
    cluster_stack(stack, "ml-cluster-vpc", {"ClusterName": "ml-cluster"})

    assert delete(stack_name="ml-cluster-vpc")[0] == 202


# -- ExecutionRole -----------------------------------------------------------------------------------------
def _with_roles(*roles: str, restricted: str | None = None) -> dict[str, Any]:
    body = create_body()
    for group, role in zip(body["clusterConfig"]["InstanceGroups"], roles, strict=False):
        group["ExecutionRole"] = role
    if restricted is not None:
        body["clusterConfig"]["RestrictedInstanceGroups"] = [
            {
                "InstanceGroupName": "rig",
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 1,
                "ExecutionRole": restricted,
            }
        ]
    return body


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (
            _with_roles(ROLE, "arn:aws:iam::123456789012:role/AdminRole"),
            "InstanceGroups[1].ExecutionRole",
            "role name 'AdminRole' does not match the stack's ExecutionRoleNamePatterns",
        ),
        (
            _with_roles(ROLE, ROLE, ROLE, restricted="arn:aws:iam::123456789012:role/PowerUser"),
            "RestrictedInstanceGroups[0].ExecutionRole",
            "role name 'PowerUser' does not match",
        ),
        (
            _with_roles(*(["arn:aws:iam::210987654321:role/sagemaker-hyperpod-execution-role"] * 3)),
            "InstanceGroups[0].ExecutionRole",
            "is in account 210987654321; "
            "this Autopilot stack passes only roles of its own account (123456789012)",
        ),
    ],
)
def test_an_execution_role_the_stack_may_not_pass_is_refused(
    stack: Deployed, body: dict[str, Any], path: str, message: str
) -> None:
    status, answer = call(api_event("create_cluster", body=body))

    assert status == 400
    assert message in {e["path"]: e["message"] for e in answer["errors"]}[path]
    assert executions(stack, "CreateClusterStateMachine") == []


def test_the_created_cluster_records_its_creator(stack: Deployed) -> None:
    assert create()[0] == 202
    _, listed = call(api_event("list_clusters", query=None))
    assert [c["createdBy"] for c in listed["clusters"]] == [USER_ARN]
