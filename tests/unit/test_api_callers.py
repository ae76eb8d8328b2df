"""Callers are people: who may act on and read a cluster through the API (docs/security.md, "Callers").

Identity Center users of one permission set share its role but are different people; plain role
sessions are their role (the session name is the caller's own choice) unless OwnerMatching=session;
a cluster Autopilot does not manage is the admins' to read; ReadAccess=owners hides a cluster from
everyone but its creator and the admins.
"""

# ruff: noqa: F401, F811  (the `stack` fixture is imported from test_api and named by the tests)

from __future__ import annotations

from typing import Any

import pytest
from autopilot.api import routes
from autopilot.settings import api_settings

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import as_admin, call, executions, stack

ACCOUNT = "123456789012"
PERMISSION_SET_ROLE = "AWSReservedSSO_MLResearcher_0123456789abcdef"
ALICE = f"arn:aws:sts::{ACCOUNT}:assumed-role/{PERMISSION_SET_ROLE}/alice"
BOB = f"arn:aws:sts::{ACCOUNT}:assumed-role/{PERMISSION_SET_ROLE}/bob"
ADMIN = f"arn:aws:iam::{ACCOUNT}:user/carol"


def as_caller(event: dict[str, Any], caller: str) -> dict[str, Any]:
    identity = event["requestContext"]["identity"]
    identity["userArn"] = caller
    # what API Gateway puts beside it: the role's unique id and the session name
    identity["caller"] = identity["user"] = f"AROAEXAMPLEEXAMPLE00:{caller.rsplit('/', 1)[1]}"
    return event


def active_cluster_of(stack: Deployed, caller: str, name: str = "ml-cluster") -> str:
    """A cluster ``caller`` created through the API, marked ACTIVE and live in SageMaker: its create's
    operation id."""
    status, body = call(as_caller(api_event("create_cluster", body=create_body(name)), caller))
    assert status == 202, body
    make_active(stack, name)
    live(stack, name)
    return str(body["operationId"])


def make_active(stack: Deployed, name: str) -> None:
    stack.client("dynamodb").update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": f"CLUSTER#{name}"}, "sk": {"S": f"CLUSTER#{name}"}},
        UpdateExpression="SET #s = :active",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":active": {"S": "ACTIVE"}},
    )


def live(stack: Deployed, name: str) -> None:
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)


def set_setting(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    """A stack parameter changed (the function reads its settings on its next cold start)."""
    monkeypatch.setenv(name, value)
    api_settings.cache_clear()
    routes.deps.cache_clear()


def delete(name: str, caller: str) -> tuple[int, Any]:
    return call(as_caller(api_event("delete_cluster", path_parameters={"name": name}, query=None), caller))


def pause(name: str, caller: str) -> tuple[int, Any]:
    event = api_event("put_healing", path_parameters={"name": name}, body={"paused": True})
    return call(as_caller(event, caller))


def reboot(name: str, caller: str) -> tuple[int, Any]:
    event = api_event("reboot_node", path_parameters={"name": name, "nodeId": "i-0123456789abcdef0"})
    return call(as_caller(event, caller))


def read(route: str, name: str, caller: str) -> tuple[int, Any]:
    """GET /clusters/{name}[/<route>] as ``caller``."""
    event = api_event("get_cluster", path_parameters={"name": name})
    if route:
        event["resource"] = event["requestContext"]["resourcePath"] = f"/clusters/{{name}}/{route}"
        event["path"] = f"/clusters/{name}/{route}"
        event["requestContext"]["path"] = f"/dev/clusters/{name}/{route}"
    return call(as_caller(event, caller))


def get_operation(operation_id: str, caller: str) -> tuple[int, Any]:
    return call(as_caller(api_event("get_operation", path_parameters={"operationId": operation_id}), caller))


def listed(caller: str) -> list[str]:
    status, body = call(as_caller(api_event("list_clusters", query=None), caller))
    assert status == 200
    return [c["clusterName"] for c in body["clusters"]]


# -- acting on a cluster ----------------------------------------------------------------------------------
def test_identity_center_users_of_one_permission_set_cannot_act_on_each_others_clusters(
    stack: Deployed,
) -> None:
    active_cluster_of(stack, ALICE)

    for action, verb in (
        (delete, "delete"),
        (pause, "pause or resume healing of"),
        (reboot, "reboot nodes of"),
    ):
        status, answer = action("ml-cluster", BOB)
        assert status == 403, (verb, answer)
        assert answer["message"].startswith(f"{BOB} may not {verb} cluster 'ml-cluster'")
    assert executions(stack, "CleanupClusterStateMachine") == []
    assert executions(stack, "ReplaceNodeStateMachine") == []

    assert pause("ml-cluster", ALICE)[0] == 200
    assert delete("ml-cluster", ALICE)[0] == 202


def test_plain_role_sessions_of_one_role_match_at_the_role_level(stack: Deployed) -> None:
    """Documented: an sts:AssumeRole session's name is its caller's own choice, so it proves nothing;
    any session of the creator's role may act on the cluster."""
    creator = f"arn:aws:sts::{ACCOUNT}:assumed-role/ResearcherRole/alice"
    active_cluster_of(stack, creator)

    assert pause("ml-cluster", f"arn:aws:sts::{ACCOUNT}:assumed-role/ResearcherRole/bob")[0] == 200
    assert delete("ml-cluster", f"arn:aws:sts::{ACCOUNT}:assumed-role/OtherRole/alice")[0] == 403
    assert delete("ml-cluster", f"arn:aws:sts::{ACCOUNT}:assumed-role/ResearcherRole/bob")[0] == 202


def test_owner_matching_session_holds_plain_role_sessions_to_their_names(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_setting(monkeypatch, "OWNER_MATCHING", "session")
    creator = f"arn:aws:sts::{ACCOUNT}:assumed-role/ResearcherRole/alice"
    active_cluster_of(stack, creator)

    assert delete("ml-cluster", f"arn:aws:sts::{ACCOUNT}:assumed-role/ResearcherRole/bob")[0] == 403
    assert delete("ml-cluster", creator)[0] == 202


def test_an_admin_session_of_identity_center_acts_on_any_cluster(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin_role = "AWSReservedSSO_Admin_fedcba9876543210"
    as_admin(monkeypatch, f"arn:aws:iam::{ACCOUNT}:role/aws-reserved/sso.amazonaws.com/{admin_role}")
    active_cluster_of(stack, ALICE)

    assert pause("ml-cluster", f"arn:aws:sts::{ACCOUNT}:assumed-role/{admin_role}/dave")[0] == 200


# -- reading a cluster ---------------------------------------------------------------------------------
def test_a_cluster_autopilot_does_not_manage_is_the_admins_to_read(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, ADMIN)
    live(stack, "unmanaged")

    for route in ("", "nodes"):
        status, answer = read(route, "unmanaged", ALICE)
        assert (status, answer["message"]) == (404, "cluster 'unmanaged' not found"), route
        assert read(route, "unmanaged", ADMIN)[0] == 200, route
    assert read("", "unmanaged", ADMIN)[1]["sagemaker"]["ClusterStatus"] == "Creating"


def test_a_deleted_clusters_record_stays_readable_without_the_live_cluster_of_its_name(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster Autopilot deleted, then created again outside it: the record is everyone's, SageMaker's
    view of the new cluster the admins' only."""
    as_admin(monkeypatch, ADMIN)
    active_cluster_of(stack, ALICE)
    stack.client("dynamodb").update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": "CLUSTER#ml-cluster"}, "sk": {"S": "CLUSTER#ml-cluster"}},
        UpdateExpression="SET #s = :deleted",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":deleted": {"S": "DELETED"}},
    )

    status, cluster = read("", "ml-cluster", BOB)
    assert (status, cluster["status"], cluster["sagemaker"]) == (200, "DELETED", None)
    assert read("", "ml-cluster", ADMIN)[1]["sagemaker"]["ClusterStatus"] == "Creating"
    assert read("nodes", "ml-cluster", BOB)[0] == 404


def test_read_access_all_lets_every_caller_read_a_managed_cluster(stack: Deployed) -> None:
    active_cluster_of(stack, ALICE)

    for route in ("", "nodes", "cost", "operations", "healing"):
        assert read(route, "ml-cluster", BOB)[0] == 200, route
    assert listed(BOB) == ["ml-cluster"]


def test_read_access_owners_hides_a_cluster_from_everyone_but_its_creator_and_the_admins(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, ADMIN)
    set_setting(monkeypatch, "READ_ACCESS", "owners")
    operation_id = active_cluster_of(stack, ALICE)

    for route in ("", "nodes", "cost", "operations", "healing"):
        status, answer = read(route, "ml-cluster", BOB)
        assert (status, answer["message"]) == (404, "cluster 'ml-cluster' not found"), route
        assert read(route, "ml-cluster", ALICE)[0] == 200, route
        assert read(route, "ml-cluster", ADMIN)[0] == 200, route
    assert get_operation(operation_id, BOB)[0] == 404
    assert get_operation(operation_id, ALICE)[0] == 200
    assert (listed(BOB), listed(ALICE), listed(ADMIN)) == ([], ["ml-cluster"], ["ml-cluster"])


# -- owner groups ----------------------------------------------------------------------------------------
def test_the_owners_a_create_names_may_act_on_and_read_the_cluster(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared cluster: alice names bob (one Identity Center user) and the Ops role (all its sessions)."""
    set_setting(monkeypatch, "READ_ACCESS", "owners")
    ops = f"arn:aws:iam::{ACCOUNT}:role/Ops"
    body = create_body("shared", owners=[BOB, ops])
    status, accepted = call(as_caller(api_event("create_cluster", body=body), ALICE))
    assert status == 202, accepted
    make_active(stack, "shared")
    live(stack, "shared")
    dave = f"arn:aws:sts::{ACCOUNT}:assumed-role/{PERMISSION_SET_ROLE}/dave"

    _, cluster = read("", "shared", BOB)
    assert (cluster["createdBy"], cluster["owners"]) == (ALICE, [BOB, ops])
    assert read("", "shared", dave)[0] == 404
    assert pause("shared", dave)[0] == 403
    assert pause("shared", f"arn:aws:sts::{ACCOUNT}:assumed-role/Ops/night-shift")[0] == 200
    assert delete("shared", BOB)[0] == 202


def test_an_owner_that_is_not_an_iam_identity_is_400_naming_it(stack: Deployed) -> None:
    body = create_body(owners=[BOB, "alice"])

    status, answer = call(as_caller(api_event("create_cluster", body=body), ALICE))

    assert status == 400
    assert {e["path"] for e in answer["errors"]} == {"owners[1]"}
    assert executions(stack, "CreateClusterStateMachine") == []
