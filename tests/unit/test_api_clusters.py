"""The cluster routes through the Powertools resolver, on the template deployed into moto (not executed):
list, get, nodes, delete, operations, validate, the OpenAPI document and the resolver's errors."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from autopilot.logic import read_clusters

from sandbox.harness.stack import Deployed
from tests.samples import ROOT, api_event, create_body
from tests.unit.api_stack import (
    USER_ARN,
    LambdaContext,
    as_admin,
    call,
    cluster_stack,
    create,
    executions,
    problems,
    registered_active,
    stack,
    target_group,
)

# --- GET /clusters, /clusters/{name}, /clusters/{name}/nodes ----------------------------------


def test_list_pages_through_registered_clusters(stack: Deployed) -> None:
    for name in ("alpha", "bravo", "charlie"):
        assert create(name)[0] == 202

    status, first = call(api_event("list_clusters", query={"limit": "2"}))
    assert status == 200
    status, second = call(api_event("list_clusters", query={"limit": "2", "nextToken": first["nextToken"]}))

    names = [c["clusterName"] for c in first["clusters"] + second["clusters"]]
    assert names == ["alpha", "bravo", "charlie"]
    assert second.get("nextToken") is None


def test_list_skips_deleted_clusters_in_full_pages(stack: Deployed) -> None:
    table = stack.stack.physical_id("StateTable")
    live = {"c03", "c07", "c11"}
    for n in range(12):
        name = f"c{n:02d}"
        stack.client("dynamodb").put_item(
            TableName=table,
            Item={
                "pk": {"S": f"CLUSTER#{name}"},
                "sk": {"S": f"CLUSTER#{name}"},
                "kind": {"S": "CLUSTER"},
                "clusterName": {"S": name},
                "status": {"S": "ACTIVE" if name in live else "DELETED"},
                "createdAt": {"S": "2025-11-21T14:00:00.000Z"},
                "updatedAt": {"S": "2025-11-21T14:00:00.000Z"},
                "lastOperationId": {"S": "op-1"},
            },
        )

    _, first = call(api_event("list_clusters", query={"limit": "2"}))
    _, second = call(api_event("list_clusters", query={"limit": "2", "nextToken": first["nextToken"]}))
    _, everything = call(api_event("list_clusters", query={"limit": "100", "includeDeleted": "true"}))

    assert [c["clusterName"] for c in first["clusters"]] == ["c03", "c07"]
    assert [c["clusterName"] for c in second["clusters"]] == ["c11"]
    assert second["nextToken"] is None
    assert len(everything["clusters"]) == 12


def test_list_rejects_a_forged_page_token(stack: Deployed) -> None:
    status, answer = call(api_event("list_clusters", query={"nextToken": "bm90LWEtdG9rZW4"}))

    assert status == 400
    assert problems(answer) == {("query", "nextToken")}


def test_list_rejects_a_limit_out_of_range(stack: Deployed) -> None:
    status, answer = call(api_event("list_clusters", query={"limit": "1000"}))

    assert status == 400
    assert problems(answer) == {("query", "limit")}


def test_get_cluster_adds_the_live_sagemaker_status(stack: Deployed, monkeypatch: pytest.MonkeyPatch) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("live")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)

    status, cluster = call(api_event("get_cluster", path_parameters={"name": "live"}))

    assert status == 200
    assert cluster["status"] is None  # not created through Autopilot
    assert cluster["sagemaker"]["ClusterStatus"] == "Creating"
    assert [g["InstanceGroupName"] for g in cluster["sagemaker"]["InstanceGroups"]] == [
        "controller-machine",
        "login-group",
        "worker-group-1",
    ]


def test_unknown_cluster_is_404(stack: Deployed) -> None:
    status, answer = call(api_event("get_cluster", path_parameters={"name": "nope"}))

    assert status == 404
    assert answer == {"message": "cluster 'nope' not found"}


def test_invalid_cluster_name_is_400_naming_the_path_parameter(stack: Deployed) -> None:
    status, answer = call(api_event("get_cluster", path_parameters={"name": "-bad-"}))

    assert status == 400
    assert problems(answer) == {("path", "name")}


def test_nodes_come_from_list_cluster_nodes_page_by_page(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("nodes")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    stack.clock.advance(3 * 3600)  # the create, then the workers' deep health checks (about 2 h)

    status, first = call(
        api_event("list_cluster_nodes", path_parameters={"name": "nodes"}, query={"limit": "4"})
    )
    status, second = call(
        api_event(
            "list_cluster_nodes",
            path_parameters={"name": "nodes"},
            query={"limit": "4", "nextToken": first["nextToken"]},
        )
    )

    assert status == 200
    nodes = first["nodes"] + second["nodes"]
    assert len(nodes) == 6  # 1 controller + 1 login + 4 workers
    assert {n["InstanceStatus"]["Status"] for n in nodes} == {"Running"}
    assert second.get("nextToken") is None
    # SageMaker's times spelled as every other time the API answers: UTC, milliseconds, Z
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", n["LaunchTime"]) for n in nodes)
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "nodes"}))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", cluster["sagemaker"]["CreationTime"])


def test_login_nodes_show_their_target_health(stack: Deployed) -> None:
    ssh, web = target_group(stack, "autopilot-login-ssh"), target_group(stack, "autopilot-login-web")
    assert create("lb", loginTargetGroupArns=[ssh, web])[0] == 202
    config = {k: v for k, v in create_body("lb")["clusterConfig"].items() if k != "Tags"}
    for group in config["InstanceGroups"]:  # the login group named by its Slurm node type
        group["SlurmConfig"] = {
            "NodeType": "Login" if group["InstanceGroupName"] == "login-group" else "Compute"
        }
    sagemaker = stack.client("sagemaker")
    sagemaker.create_cluster(**config)
    stack.clock.advance(3 * 3600)
    [login] = [
        n
        for n in sagemaker.list_cluster_nodes(ClusterName="lb")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "login-group"
    ]
    ip = sagemaker.describe_cluster_node(ClusterName="lb", NodeId=login["InstanceId"])["NodeDetails"][
        "PrivatePrimaryIp"
    ]
    stack.client("elbv2").register_targets(TargetGroupArn=ssh, Targets=[{"Id": ip, "Port": 22}])

    status, answer = call(api_event("list_cluster_nodes", path_parameters={"name": "lb"}))

    assert status == 200
    shown = {n["InstanceId"]: n.get("loadBalancer") for n in answer["nodes"]}
    [state] = {t["state"] for t in shown[login["InstanceId"]] if t["targetGroupArn"] == ssh}
    assert state in {"initial", "healthy"}
    assert [(t["targetGroupArn"], t["port"]) for t in shown[login["InstanceId"]]] == [(ssh, 22), (web, 22)]
    assert shown[login["InstanceId"]][1]["state"] == "unregistered"
    assert [i for i, lb in shown.items() if lb is not None] == [login["InstanceId"]]


def test_a_node_page_token_sagemaker_did_not_issue_is_400(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_admin(monkeypatch, USER_ARN)  # a cluster Autopilot does not manage is the admins' to read
    config = {k: v for k, v in create_body("nodes")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)

    status, answer = call(
        api_event("list_cluster_nodes", path_parameters={"name": "nodes"}, query={"nextToken": "forged"})
    )

    assert status == 400
    assert problems(answer) == {("query", "nextToken")}


def test_nodes_of_an_unknown_cluster_is_404(stack: Deployed) -> None:
    status, _ = call(api_event("list_cluster_nodes", path_parameters={"name": "nope"}))

    assert status == 404


# --- DELETE /clusters/{name} ------------------------------------------------------------------


def test_delete_starts_the_cleanup_workflow(stack: Deployed) -> None:
    registered_active(stack, "ml-cluster")
    cluster_stack(stack, "ml-cluster-vpc", {"ClusterName": "ml-cluster"})

    status, body = call(api_event("delete_cluster"))

    assert status == 202
    [execution] = executions(stack, "CleanupClusterStateMachine")
    workflow_input = json.loads(execution["input"])
    assert workflow_input["operationId"] == body["operationId"]
    assert workflow_input["budgetName"] == "hyperpod-ml-cluster"
    assert workflow_input["stackName"] == "ml-cluster-vpc"
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
    assert cluster["status"] == "DELETING"
    assert cluster["lastOperationId"] == body["operationId"]


def test_delete_while_creating_is_409(stack: Deployed) -> None:
    assert create()[0] == 202

    status, answer = call(api_event("delete_cluster"))

    assert status == 409
    assert "CREATING" in answer["message"]


def test_delete_of_an_unknown_cluster_is_404(stack: Deployed) -> None:
    status, _ = call(api_event("delete_cluster", path_parameters={"name": "nope"}, query=None))

    assert status == 404


def test_delete_adopts_a_cluster_autopilot_did_not_create(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {k: v for k, v in create_body("outside")["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    # no creator on record: only the stack's admins may delete it
    as_admin(monkeypatch, "arn:aws:iam::123456789012:role/ResearcherRole")

    status, _body = call(api_event("delete_cluster", path_parameters={"name": "outside"}, query=None))

    assert status == 202
    workflow_input = json.loads(executions(stack, "CleanupClusterStateMachine")[0]["input"])
    assert workflow_input["stackName"] is None
    assert workflow_input["budgetName"] == "hyperpod-outside"
    _, cluster = call(api_event("get_cluster", path_parameters={"name": "outside"}))
    assert cluster["status"] == "DELETING"


def test_delete_rejects_a_bad_stack_name(stack: Deployed) -> None:
    status, answer = call(api_event("delete_cluster", query={"stackName": "not a stack"}))

    assert status == 400
    assert problems(answer) == {("query", "stackName")}


# --- operations, validate, openapi, errors ----------------------------------------------------


def test_unknown_operation_is_404(stack: Deployed) -> None:
    status, answer = call(api_event("get_operation"))

    assert status == 404
    assert "op-20251121140000-0a1b2c3d" in answer["message"]


def test_validate_reports_without_creating(stack: Deployed) -> None:
    valid = create_body()
    invalid = create_body()
    invalid["clusterConfig"]["InstanceGroups"][0]["InstanceCount"] = -1

    status, good = call(api_event("validate", body={"clusterConfig": valid["clusterConfig"]}))
    _, bad = call(api_event("validate", body={"clusterConfig": invalid["clusterConfig"]}))

    assert status == 200
    assert good["valid"] is True
    assert bad["valid"] is False
    assert ("cluster-config.json", "InstanceGroups[0].InstanceCount") in problems(bad)
    assert executions(stack, "CreateClusterStateMachine") == []


def test_openapi_document_is_served_and_docs_are_current(stack: Deployed) -> None:
    status, document = call(api_event("openapi"))

    assert status == 200
    assert set(document["paths"]) == {
        "/clusters",
        "/clusters/{name}",
        "/clusters/{name}/nodes",
        "/clusters/{name}/cost",
        "/clusters/{name}/usage",
        "/clusters/{name}/account-budgets",
        "/clusters/{name}/growth-block",
        "/clusters/{name}/nodes/{nodeId}/reboot",
        "/clusters/{name}/nodes/{nodeId}/replace",
        "/clusters/{name}/operations",
        "/clusters/{name}/healing",
        "/clusters/{name}/instance-groups/{group}",
        "/operations/{operationId}",
        "/validate",
    }
    committed = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert committed == document, "regenerate: .venv/bin/python -m autopilot.api.openapi docs/openapi.json"


def test_unknown_route_is_404_json(stack: Deployed) -> None:
    event = api_event("list_clusters", query=None)
    event["path"] = event["resource"] = "/nowhere"

    status, answer = call(event)

    assert status == 404
    assert answer == {"message": "no such resource: /nowhere"}


def test_unexpected_errors_are_500_json_without_details(
    stack: Deployed, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(read_clusters, "list_clusters", explode)

    status, answer = call(api_event("list_clusters", query=None))

    assert status == 500
    assert answer == {"message": "internal error"}


def test_lambda_handler_serves_the_api(stack: Deployed) -> None:
    spec = importlib.util.spec_from_file_location("api_app", Path(ROOT / "functions" / "api" / "app.py"))
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    response = module.lambda_handler(api_event("list_clusters", query=None), LambdaContext())

    assert response["statusCode"] == 200
    assert json.loads(response["body"]) == {"clusters": [], "nextToken": None}
