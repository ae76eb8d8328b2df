"""The healing routes through the Powertools resolver, on the template deployed into moto (workflows not
executed): node health, operator repairs, a cluster's operations, the healing switch, and the sweep
HealingSweepFunction runs on the resume's Healing Resumed event."""

# ruff: noqa: F401, F811  (the `stack` and `operations` fixtures are imported and named by the tests)

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from autopilot import aws
from autopilot.api import routes
from autopilot.dal.healing import HealingTable
from autopilot.models.records import NodeHealth
from autopilot.settings import healing_settings, healing_sweep_settings
from botocore.exceptions import ClientError

from sandbox.emulator import seams
from sandbox.emulator.sqs import MessageMoves
from sandbox.harness.stack import Deployed
from tests.samples import ROOT, api_event, create_body, load_event
from tests.unit.api_stack import (
    USER_ARN,
    as_admin,
    call,
    create,
    executions,
    problems,
    registered_active,
    stack,
)
from tests.unit.test_api_bad_input import FakeDependencies, client_error, operations
from tests.unit.test_api_bad_input import call as bad_input_call

OTHER_USER = "arn:aws:iam::123456789012:user/mallory"
REPORTED_AT = "2026-11-22T10:00:00.000Z"
REPORTED = datetime.fromisoformat(REPORTED_AT)


@pytest.fixture
def healing(stack: Deployed) -> Iterator[HealingTable]:
    healing_settings.cache_clear()
    yield HealingTable(stack.stack.physical_id("StateTable"), dynamodb=stack.client("dynamodb"))
    healing_settings.cache_clear()


def active_cluster(stack: Deployed, name: str = "ml-cluster") -> dict[str, list[str]]:
    """A cluster created through the API, ACTIVE, with its nodes Running in SageMaker: group -> node ids."""
    registered_active(stack, name)
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    stack.client("sagemaker").create_cluster(**config)
    stack.clock.advance(3600)
    nodes = stack.client("sagemaker").list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
    groups: dict[str, list[str]] = {}
    for node in nodes:
        groups.setdefault(node["InstanceGroupName"], []).append(node["InstanceId"])
    return groups


def repair(action: str, node_id: str, *, name: str = "ml-cluster", caller: str = USER_ARN) -> tuple[int, Any]:
    event = api_event(f"{action}_node", path_parameters={"name": name, "nodeId": node_id})
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


def set_paused(paused: Any, *, name: str = "ml-cluster", caller: str = USER_ARN) -> tuple[int, Any]:
    event = api_event("put_healing", path_parameters={"name": name}, body={"paused": paused})
    event["requestContext"]["identity"]["userArn"] = caller
    return call(event)


def repair_inputs(stack: Deployed) -> list[dict[str, Any]]:
    return [json.loads(e["input"]) for e in executions(stack, "ReplaceNodeStateMachine")]


# --- GET /clusters/{name}/nodes ----------------------------------------------------------------


def test_nodes_show_autopilot_health_and_the_repair_in_flight(stack: Deployed, healing: HealingTable) -> None:
    groups = active_cluster(stack)
    sick, well = groups["worker-group-1"][:2]
    reason = "HMA has detected fault type NvidiaErrorTerminate on this node and is unhealthy."
    healing.record_health("ml-cluster", sick, NodeHealth.UNHEALTHY, reason=reason, at=REPORTED)
    status, accepted = repair("replace", sick)
    assert status == 202

    status, listed = call(api_event("list_cluster_nodes", path_parameters={"name": "ml-cluster"}))

    assert status == 200
    nodes = {n["InstanceId"]: n for n in listed["nodes"]}
    assert nodes[sick]["health"] == {"status": "Unhealthy", "reason": reason, "since": REPORTED_AT}
    assert nodes[sick]["repair"] == {
        "operationId": accepted["operationId"],
        "action": None,
        "status": "RUNNING",
    }
    assert nodes[well]["health"] == {"status": "Healthy", "reason": None, "since": None}
    assert nodes[well]["repair"] is None


# --- POST /clusters/{name}/nodes/{nodeId}/reboot|replace ------------------------------------------


@pytest.mark.parametrize("action", ["reboot", "replace"])
def test_an_operator_repair_starts_the_workflow_with_the_api_trigger(
    stack: Deployed, healing: HealingTable, action: str
) -> None:
    node = active_cluster(stack)["worker-group-1"][0]

    status, accepted = repair(action, node)

    assert status == 202
    assert accepted["clusterName"] == "ml-cluster"
    [workflow_input] = repair_inputs(stack)
    assert workflow_input["operationId"] == accepted["operationId"]
    assert (workflow_input["nodeId"], workflow_input["action"], workflow_input["trigger"]) == (
        node,
        action,
        "api",
    )
    _, operation = call(api_event("get_operation", path_parameters={"operationId": accepted["operationId"]}))
    assert operation["kind"] == "ReplaceNode"
    assert (operation["nodeId"], operation["trigger"], operation["requestedBy"]) == (node, "api", USER_ARN)
    assert operation["executionArn"].endswith(f":{accepted['operationId']}")


def test_a_second_repair_of_a_node_is_409_naming_the_open_one(stack: Deployed, healing: HealingTable) -> None:
    node = active_cluster(stack)["worker-group-1"][0]
    _, first = repair("reboot", node)

    status, answer = repair("replace", node)

    assert status == 409
    assert first["operationId"] in answer["message"]
    assert len(repair_inputs(stack)) == 1


def test_the_slurm_controller_is_never_replaced_but_may_be_rebooted(
    stack: Deployed, healing: HealingTable
) -> None:
    [controller] = active_cluster(stack)["controller-machine"]

    status, answer = repair("replace", controller)

    assert status == 409
    assert controller in answer["message"]
    assert "controller" in answer["message"]
    assert repair_inputs(stack) == []
    assert repair("reboot", controller)[0] == 202
    [workflow_input] = repair_inputs(stack)
    assert workflow_input["allowReplace"] is False  # a reboot that does not heal is not escalated


def test_an_operators_replace_in_a_deep_health_group_allows_for_the_new_instances_checks(
    stack: Deployed, healing: HealingTable
) -> None:
    # worker-group-1 runs OnStartDeepHealthChecks (the controller's group does not): its new instance
    # spends ~2 h in checks before Running, past ReplaceDeadlineMinutes alone
    groups = active_cluster(stack)
    assert repair("replace", groups["worker-group-1"][0])[0] == 202
    assert repair("reboot", groups["controller-machine"][0])[0] == 202
    deadlines = {i["nodeId"]: i["deadlines"]["replaceSeconds"] for i in repair_inputs(stack)}
    environment = stack.environment("ApiFunction")
    replace = 60 * int(environment["REPLACE_DEADLINE_MINUTES"])
    checks = 60 * int(environment["DEEP_HEALTH_CHECK_MINUTES"])
    assert deadlines == {
        groups["worker-group-1"][0]: replace + checks,
        groups["controller-machine"][0]: replace,
    }


def test_a_login_node_is_only_rebooted_unless_allow_login_replace(
    stack: Deployed, healing: HealingTable
) -> None:
    groups = active_cluster(stack)
    [login] = groups["login-group"]
    worker = groups["worker-group-1"][0]

    status, answer = repair("replace", login)

    assert status == 409
    assert login in answer["message"]
    assert "AllowLoginReplace" in answer["message"]
    assert repair_inputs(stack) == []
    assert repair("reboot", login)[0] == 202
    assert repair("reboot", worker)[0] == 202
    allowed = {i["nodeId"]: i["allowReplace"] for i in repair_inputs(stack)}
    assert allowed == {login: False, worker: True}


def test_allow_login_replace_lets_an_operator_replace_a_login_node(
    stack: Deployed, healing: HealingTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLOW_LOGIN_REPLACE", "true")
    healing_settings.cache_clear()
    [login] = active_cluster(stack)["login-group"]

    assert repair("replace", login)[0] == 202
    [workflow_input] = repair_inputs(stack)
    assert (workflow_input["action"], workflow_input["allowReplace"]) == ("replace", True)


@pytest.mark.parametrize(
    ("name", "node_id", "found"),
    [
        ("ml-cluster", "i-0123456789abcdef0", "node i-0123456789abcdef0"),
        ("nope", "i-0123456789abcdef0", "'nope'"),
    ],
)
def test_an_unknown_cluster_or_node_is_404(
    stack: Deployed, healing: HealingTable, name: str, node_id: str, found: str
) -> None:
    active_cluster(stack)

    status, answer = repair("reboot", node_id, name=name)

    assert status == 404
    assert found in answer["message"]


@pytest.mark.parametrize("node_id", ["i-123", "node-1", "i-0123456789ABCDEF0"])
def test_a_malformed_node_id_is_400_naming_it(stack: Deployed, node_id: str) -> None:
    status, answer = repair("replace", node_id)

    assert status == 400
    assert problems(answer) == {("path", "nodeId")}


def test_a_cluster_that_is_not_active_is_409(stack: Deployed, healing: HealingTable) -> None:
    assert create()[0] == 202  # CREATING

    status, answer = repair("reboot", "i-0123456789abcdef0")

    assert status == 409
    assert "CREATING" in answer["message"]


def test_only_the_creator_and_the_admins_may_repair(
    stack: Deployed, healing: HealingTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = active_cluster(stack)["worker-group-1"][0]

    status, answer = repair("reboot", node, caller=OTHER_USER)
    assert status == 403
    assert "may not reboot nodes of cluster 'ml-cluster'" in answer["message"]
    assert repair_inputs(stack) == []

    as_admin(monkeypatch, OTHER_USER)
    assert repair("reboot", node, caller=OTHER_USER)[0] == 202


def test_a_paused_cluster_still_takes_an_operators_repair(stack: Deployed, healing: HealingTable) -> None:
    node = active_cluster(stack)["worker-group-1"][0]
    assert set_paused(True)[0] == 200

    status, _ = repair("replace", node)

    assert status == 202
    assert len(repair_inputs(stack)) == 1


def test_an_operator_repair_follows_a_repair_whose_fault_time_is_ahead_of_the_api(
    stack: Deployed, healing: HealingTable
) -> None:
    # the last fault claimed carries its event's time (HyperPod's clock), here ahead of the API's
    node = active_cluster(stack)["worker-group-1"][0]
    healing.dynamodb.update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": "CLUSTER#ml-cluster"}, "sk": {"S": f"NODE#{node}"}},
        UpdateExpression="SET kind = :kind, clusterName = :cluster, nodeId = :node, lastFaultAt = :later",
        ExpressionAttributeValues={
            ":kind": {"S": "NODE"},
            ":cluster": {"S": "ml-cluster"},
            ":node": {"S": node},
            ":later": {"S": "2999-01-01T00:00:00.000Z"},
        },
    )

    status, accepted = repair("reboot", node)

    assert status == 202
    [workflow_input] = repair_inputs(stack)
    assert workflow_input["operationId"] == accepted["operationId"]
    assert workflow_input["fault"]["detectedAt"] > "2999-01-01T00:00:00.000Z"


# --- GET /clusters/{name}/operations ----------------------------------------------------------


def test_operations_are_listed_newest_first_by_kind_and_page(stack: Deployed, healing: HealingTable) -> None:
    groups = active_cluster(stack)
    created = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))[1]["lastOperationId"]
    repairs = []
    for node in groups["worker-group-1"][:3]:
        stack.clock.advance(1)
        repairs.append(repair("reboot", node)[1]["operationId"])

    def listed(**query: str) -> tuple[int, Any]:
        return call(api_event("list_cluster_operations", path_parameters={"name": "ml-cluster"}, query=query))

    _, everything = listed()
    _, replaces = listed(kind="ReplaceNode", limit="2")
    _, rest = listed(kind="ReplaceNode", limit="2", nextToken=replaces["nextToken"])
    _, creates = listed(kind="CreateCluster")

    ids = [o["operationId"] for o in everything["operations"]]
    assert set(ids) == {*repairs, created}
    assert ids[-1] == created  # oldest last
    assert [o["kind"] for o in everything["operations"][:3]] == ["ReplaceNode"] * 3
    assert everything["nextToken"] is None
    paged = [o["operationId"] for o in replaces["operations"] + rest["operations"]]
    assert sorted(paged) == sorted(repairs)
    assert len(replaces["operations"]) == 2
    assert rest["nextToken"] is None
    assert [o["operationId"] for o in creates["operations"]] == [created]
    assert everything["operations"][0]["trigger"] == "api"


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ({"kind": "Reboot"}, "kind"),
        ({"nextToken": "bm90LWEtdG9rZW4"}, "nextToken"),
        ({"limit": "0"}, "limit"),
    ],
)
def test_operations_refuse_bad_queries_naming_them(
    stack: Deployed, healing: HealingTable, query: dict[str, str], path: str
) -> None:
    active_cluster(stack)

    status, answer = call(
        api_event("list_cluster_operations", path_parameters={"name": "ml-cluster"}, query=query)
    )

    assert status == 400
    assert problems(answer) == {("query", path)}


def test_operations_of_an_unregistered_cluster_is_404(stack: Deployed) -> None:
    status, _ = call(api_event("list_cluster_operations", path_parameters={"name": "nope"}))

    assert status == 404


# --- GET / PUT /clusters/{name}/healing --------------------------------------------------------


def test_healing_shows_the_breaker_and_the_slots(stack: Deployed, healing: HealingTable) -> None:
    active_cluster(stack)

    status, view = call(api_event("get_healing", path_parameters={"name": "ml-cluster"}))

    settings = healing_settings()
    assert status == 200
    assert view["paused"] is False
    assert view["breaker"] == {
        "unhealthyInWindow": 0,
        "nodeCount": 6,
        "maxUnhealthyPercent": settings.max_unhealthy_percent,
        "windowMinutes": settings.breaker_window_minutes,
        "trippedAt": None,
    }
    assert (view["activeRepairs"], view["maxConcurrentRepairs"]) == (0, settings.max_concurrent_repairs)


def resumed_events(stack: Deployed) -> list[dict[str, Any]]:
    return [e for e in stack.operation_events() if e["detail-type"] == "Healing Resumed"]


def test_pausing_by_hand_records_who_and_resuming_announces_it_without_sweeping(
    stack: Deployed, healing: HealingTable
) -> None:
    sick = active_cluster(stack)["worker-group-1"][0]

    status, paused = set_paused(True)
    assert status == 200
    assert (paused["paused"], paused["pausedBy"]) == (True, USER_ARN)
    # an Unhealthy report while paused: kept, nothing started
    healing.record_health("ml-cluster", sick, NodeHealth.UNHEALTHY, reason="fault type X", at=REPORTED)
    assert repair_inputs(stack) == []

    status, resumed = set_paused(False)

    assert status == 200
    assert (resumed["paused"], resumed["pausedBy"], resumed["resumedBy"]) == (False, None, USER_ARN)
    # the answer does not wait for the sweep: HealingSweepFunction runs it on the event
    assert repair_inputs(stack) == []
    [event] = resumed_events(stack)
    assert (event["source"], event["detail"]) == (
        "hyperpod.autopilot",
        {"clusterName": "ml-cluster", "resumedBy": USER_ARN, "resumedAt": resumed["resumedAt"]},
    )
    assert set_paused(False)[0] == 200  # already running: nothing more
    assert set_paused(True)[0] == 200
    assert resumed_events(stack) == []
    assert repair_inputs(stack) == []


class _RejectingEvents:
    """EventBridge answering PutEvents with the entry failed (a 200, not an error)."""

    def put_events(self, **_: Any) -> dict[str, Any]:
        return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "x"}]}


class _ThrottledEvents:
    def put_events(self, **_: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "PutEvents")


@pytest.mark.parametrize("events", [_RejectingEvents(), _ThrottledEvents()], ids=["rejected", "throttled"])
def test_a_resume_whose_event_is_lost_stands(stack: Deployed, healing: HealingTable, events: Any) -> None:
    # the next scheduled sweep starts the repairs: a 5xx would only have the caller retry a no-op
    active_cluster(stack)
    assert set_paused(True)[0] == 200
    routes.deps()._events = events

    status, resumed = set_paused(False)

    assert status == 200
    assert (resumed["paused"], resumed["resumedBy"]) == (False, USER_ARN)
    assert healing.get_healing("ml-cluster").paused is False


SWEEP_CONTEXT = SimpleNamespace(
    function_name="HealingSweepFunction",
    memory_limit_in_mb=256,
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:HealingSweepFunction",
    aws_request_id="00000000-0000-4000-8000-000000000000",
)


def _sweep_function(stack: Deployed, monkeypatch: pytest.MonkeyPatch) -> Any:
    """functions/healing_sweep/app.py with HealingSweepFunction's environment from the template."""
    for key, value in stack.environment("HealingSweepFunction").items():
        monkeypatch.setenv(key, value)
    healing_settings.cache_clear()
    healing_sweep_settings.cache_clear()
    aws.client.cache_clear()
    spec = importlib.util.spec_from_file_location(
        "healing_sweep_app", ROOT / "functions/healing_sweep/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
def test_the_sweep_function_sweeps_only_the_resumed_cluster_on_its_event(
    stack: Deployed, healing: HealingTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    sick = active_cluster(stack)["worker-group-1"][0]
    elsewhere = active_cluster(stack, "other-cluster")["worker-group-1"][0]
    assert set_paused(True)[0] == 200
    # Four hours before the schedule's sweep: past HyperPod's own repair deadline on these NodeRecovery
    # Automatic clusters, deep health allowance included (worker-group-1 runs OnStartDeepHealthChecks).
    reported = datetime(2026, 11, 22, 8, tzinfo=UTC)
    for name, node in (("ml-cluster", sick), ("other-cluster", elsewhere)):
        healing.record_health(name, node, NodeHealth.UNHEALTHY, reason="fault type X", at=reported)
    # EventBridge's event as the rule delivers it (moto's own delivery drops "account")
    with seams.installed(seams.keep_event_account):
        assert set_paused(False)[0] == 200
    [event] = resumed_events(stack)
    context = SWEEP_CONTEXT
    function = _sweep_function(stack, monkeypatch)

    resumed = function.lambda_handler(event, context)

    assert resumed["repair_started"] == 1
    assert [(i["clusterName"], i["nodeId"], i["trigger"]) for i in repair_inputs(stack)] == [
        ("ml-cluster", sick, "sweep")
    ]
    # the schedule's sweep takes every cluster: the other one's repair, and the resumed one's only once
    schedule = load_event("schedule/scheduled_event.json")
    moves = MessageMoves(lambda: datetime.fromisoformat(schedule["time"]))  # its DLQ redrive: moto lacks it
    moves.install()
    try:
        scheduled = function.lambda_handler(schedule, context)
    finally:
        moves.uninstall()
    assert scheduled["repair_started"] == 1
    assert sorted((i["clusterName"], i["nodeId"]) for i in repair_inputs(stack)) == [
        ("ml-cluster", sick),
        ("other-cluster", elsewhere),
    ]


@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
def test_a_resume_event_for_a_cluster_being_deleted_sweeps_nothing(
    stack: Deployed, healing: HealingTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    sick = active_cluster(stack)["worker-group-1"][0]
    assert set_paused(True)[0] == 200
    healing.record_health("ml-cluster", sick, NodeHealth.UNHEALTHY, reason="fault type X", at=REPORTED)
    with seams.installed(seams.keep_event_account):
        assert set_paused(False)[0] == 200
    [event] = resumed_events(stack)
    # EventBridge retried the event for a while; meanwhile a delete began
    stack.client("dynamodb").update_item(
        TableName=stack.stack.physical_id("StateTable"),
        Key={"pk": {"S": "CLUSTER#ml-cluster"}, "sk": {"S": "CLUSTER#ml-cluster"}},
        UpdateExpression="SET #s = :deleting",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":deleting": {"S": "DELETING"}},
    )

    swept = _sweep_function(stack, monkeypatch).lambda_handler(event, SWEEP_CONTEXT)

    assert swept == {"cluster_not_active": 1}
    assert repair_inputs(stack) == []


def test_only_the_creator_and_the_admins_may_pause(stack: Deployed, healing: HealingTable) -> None:
    active_cluster(stack)

    status, answer = set_paused(True, caller=OTHER_USER)

    assert status == 403
    assert "may not pause or resume healing of cluster 'ml-cluster'" in answer["message"]
    assert call(api_event("get_healing", path_parameters={"name": "ml-cluster"}))[1]["paused"] is False


def test_a_pause_keeps_its_reason(stack: Deployed, healing: HealingTable) -> None:
    active_cluster(stack)
    event = api_event(
        "put_healing",
        path_parameters={"name": "ml-cluster"},
        body={"paused": True, "reason": "GPU driver update"},
    )
    event["requestContext"]["identity"]["userArn"] = USER_ARN

    status, answer = call(event)

    assert status == 200
    assert (answer["paused"], answer["pausedReason"]) == (True, "GPU driver update")
    assert set_paused(False)[1].get("pausedReason") is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"paused": False, "reason": "x"}, "reason"), ({"paused": True, "reason": ""}, "reason")],
)
def test_a_reason_without_a_pause_is_400_naming_it(stack: Deployed, body: dict[str, Any], field: str) -> None:
    status, answer = call(api_event("put_healing", path_parameters={"name": "ml-cluster"}, body=body))

    assert status == 400
    assert {p for _, p in problems(answer)} == {field}


@pytest.mark.parametrize("body", [{"paused": "yes"}, {"paused": 1}, {}, {"paused": True, "why": "x"}])
def test_a_bad_healing_body_is_400_naming_the_field(stack: Deployed, body: dict[str, Any]) -> None:
    event = api_event("put_healing", path_parameters={"name": "ml-cluster"}, body=body)

    status, answer = call(event)

    assert status == 400
    assert {p for _, p in problems(answer)} <= {"paused", "why"}
    assert answer["errors"]


def test_healing_of_an_unknown_cluster_is_404(stack: Deployed) -> None:
    assert call(api_event("get_healing", path_parameters={"name": "nope"}))[0] == 404
    assert set_paused(True, name="nope")[0] == 404


# --- every new route: reached without AWS, and AWS trouble is a 503 ----------------------------

_ROUTES = [
    ("reboot_node", {"name": "c1", "nodeId": "i-0123456789abcdef0"}, None),
    ("replace_node", {"name": "c1", "nodeId": "i-0123456789abcdef0"}, None),
    ("list_cluster_operations", {"name": "c1"}, None),
    ("get_healing", {"name": "c1"}, None),
    ("put_healing", {"name": "c1"}, {"paused": False}),
]


@pytest.mark.parametrize(("route", "path", "body"), _ROUTES, ids=[r[0] for r in _ROUTES])
def test_each_healing_route_reaches_its_use_case_and_answers_503_when_aws_is_busy(
    operations: FakeDependencies, route: str, path: dict[str, str], body: dict[str, Any] | None
) -> None:
    event = api_event(route, path_parameters=path, **({"body": body} if body else {}))

    reached = bad_input_call(event)
    operations.error = client_error("ThrottlingException")
    busy = bad_input_call(event)

    assert (reached[0], reached[2]["message"]) == (404, "reached the use case")
    assert busy[0] == 503
    assert int(busy[1]["Retry-After"]) > 0
