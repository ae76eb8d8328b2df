"""The healing sweep on the template deployed into moto with the HyperPod simulator (workflows recorded,
not executed): what the event path missed is repaired once, paused clusters wait, stuck nodes and
overdue repairs are closed, one cluster's failure does not stop the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from autopilot.dal.healing import HealingTable, healing_key
from autopilot.dal.repair_watch import RepairWatch
from autopilot.dal.state_table import StateTable
from autopilot.dal.stuck_nodes import StuckNodes
from autopilot.logic.healing.start_repair import RepairRequest, start_repair
from autopilot.logic.healing.sweep import HealingSweep, SweepIncompleteError, repair_deadline
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.records import (
    ClusterStatus,
    Fault,
    NodeAction,
    NodeHealth,
    Operation,
    OperationError,
    OperationStatus,
    RepairTrigger,
    iso,
)
from autopilot.settings import HealingSettings, HealingSweepSettings
from botocore.exceptions import ClientError

from sandbox.harness.stack import Deployed, deployed
from tests.samples import create_body

NOW = datetime(2026, 11, 22, 10, 0, 0).astimezone()


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(execute=False) as d:
        yield d


def settings(stack: Deployed) -> HealingSettings:
    return HealingSettings.from_environ(stack.environment("HealingSweepFunction"))


def table(stack: Deployed) -> str:
    return str(stack.stack.physical_id("StateTable"))


def healing(stack: Deployed) -> HealingTable:
    return HealingTable(table(stack), dynamodb=stack.client("dynamodb"))


def sweep(stack: Deployed, *, sagemaker: Any = None) -> HealingSweep:
    environment = stack.environment("HealingSweepFunction")
    client = sagemaker or stack.client("sagemaker")
    return HealingSweep(
        store=StateTable(table(stack), client=stack.client("dynamodb")),
        healing=healing(stack),
        stuck=StuckNodes(table(stack), dynamodb=stack.client("dynamodb")),
        watch=RepairWatch(table(stack), dynamodb=stack.client("dynamodb")),
        topology=TopologyReader(sagemaker=client, s3=stack.client("s3")),
        sagemaker=client,
        stepfunctions=stack.client("stepfunctions"),
        events=stack.client("events"),
        sns=stack.client("sns"),
        settings=settings(stack),
        stuck_node_minutes=HealingSweepSettings.from_environ(environment).stuck_node_minutes,
    )


def registered(
    stack: Deployed, name: str, *, running: bool = True, node_recovery: str = "None"
) -> dict[str, list[str]]:
    """An ACTIVE registered cluster in SageMaker (nodes Running unless ``running`` is False): group -> ids."""
    stack.client("dynamodb").put_item(
        TableName=table(stack),
        Item={
            "pk": {"S": f"CLUSTER#{name}"},
            "sk": {"S": f"CLUSTER#{name}"},
            "kind": {"S": "CLUSTER"},
            "clusterName": {"S": name},
            "status": {"S": "ACTIVE"},
            "createdAt": {"S": "2026-11-22T09:00:00.000Z"},
            "updatedAt": {"S": "2026-11-22T09:00:00.000Z"},
            "lastOperationId": {"S": "op-20261122090000-00000000"},
        },
    )
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    config["NodeRecovery"] = node_recovery
    stack.client("sagemaker").create_cluster(**config)
    if running:  # created, and worker-group-1's deep health checks passed
        stack.clock.advance(3600 + stack.hyperpod.timings.deep_health_check)
    nodes = stack.client("sagemaker").list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
    groups: dict[str, list[str]] = {}
    for node in nodes:
        groups.setdefault(node["InstanceGroupName"], []).append(node["InstanceId"])
    return groups


# create_body's group with OnStartDeepHealthChecks (its new instances are checked ~2 h before Running)
DEEP_HEALTH_GROUP = "worker-group-1"


def repairs(stack: Deployed) -> list[dict[str, Any]]:
    sfn = stack.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=stack.stack.arn("ReplaceNodeStateMachine"))["executions"]
    return [json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"]) for e in listed]


def event_repair(
    stack: Deployed,
    node_id: str,
    action: NodeAction,
    fault_type: str,
    *,
    at: datetime = NOW,
    instance_group: str | None = None,
) -> Operation | None:
    """A repair of a node of c1 started by the event path (Node Health event at ``at``), as
    ClusterEventsFunction starts one (the node item keeps ``instance_group`` when given)."""
    return start_repair(
        RepairRequest(
            cluster_name="c1",
            node_id=node_id,
            action=action,
            trigger=RepairTrigger.EVENT,
            fault=Fault(reason=f"fault type {fault_type}", detected_at=at),
            allow_replace=True,
            instance_group=instance_group,
            deep_health_checks=instance_group == DEEP_HEALTH_GROUP,
        ),
        healing=healing(stack),
        stepfunctions=stack.client("stepfunctions"),
        events=stack.client("events"),
        settings=settings(stack),
        now=at,
    )


def fail_node(stack: Deployed, name: str, node_id: str) -> None:
    stack.hyperpod.fault_node_unhealthy(name, node_id, instance_status="Failure", auto_recover=False)


def test_a_failed_node_the_events_missed_is_repaired_once(stack: Deployed) -> None:
    node = registered(stack, "c1")["worker-group-1"][0]
    fail_node(stack, "c1", node)

    first = sweep(stack).run(NOW)
    again = sweep(stack).run(NOW + timedelta(minutes=5))

    assert first["repair_started"] == 1
    assert "repair_started" not in again
    [workflow_input] = repairs(stack)
    assert (workflow_input["nodeId"], workflow_input["trigger"], workflow_input["action"]) == (
        node,
        "sweep",
        "replace",
    )
    record = healing(stack).get_node("c1", node)
    assert record is not None
    assert record.health is NodeHealth.UNHEALTHY
    assert record.open_repair == workflow_input["operationId"]


def test_a_paused_cluster_keeps_the_fault_and_the_resume_repairs_it(stack: Deployed) -> None:
    node = registered(stack, "c1")["worker-group-1"][0]
    healing(stack).pause("c1", by="arn:aws:iam::123456789012:user/ops", reason="by hand", now=NOW)
    fail_node(stack, "c1", node)

    paused = sweep(stack).run(NOW)
    assert paused["unhealthy_while_paused"] == 1
    assert repairs(stack) == []
    record = healing(stack).get_node("c1", node)
    assert record is not None
    assert record.health is NodeHealth.UNHEALTHY

    healing(stack).resume("c1", by="arn:aws:iam::123456789012:user/ops", now=NOW)
    resumed = sweep(stack).run(NOW + timedelta(minutes=5))

    assert resumed["repair_started"] == 1
    assert [r["nodeId"] for r in repairs(stack)] == [node]


def test_nodes_stuck_out_of_running_are_repaired_past_stuck_node_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # every node of the cluster is stuck here: a breaker that never trips lets each get its repair
    with deployed(execute=False, parameters={"MaxUnhealthyPercent": 100}) as stack:
        groups = registered(stack, "c1", running=False)  # every node Pending
        environment = stack.environment("HealingSweepFunction")
        stuck_after = timedelta(minutes=HealingSweepSettings.from_environ(environment).stuck_node_minutes)

        early = sweep(stack).run(NOW)
        before = sweep(stack).run(NOW + stuck_after - timedelta(minutes=1))
        late = sweep(stack).run(NOW + stuck_after)

        assert "repair_started" not in early
        assert "repair_started" not in before
        started = {r["nodeId"]: r for r in repairs(stack)}
        assert late["repair_started"] == len(started) == 6
        [controller] = groups["controller-machine"]
        [login] = groups["login-group"]
        worker = groups["worker-group-1"][0]
        actions = {node: started[node]["action"] for node in (controller, login, worker)}
        assert actions == {controller: "alert", login: "reboot", worker: "replace"}
        # a login node's reboot that does not heal is not escalated to a replace (AllowLoginReplace=false)
        allowed = {node: started[node]["allowReplace"] for node in (controller, login, worker)}
        assert allowed == {controller: False, login: False, worker: True}
        assert "not Running since" in started[worker]["fault"]["reason"]


def test_an_automatic_cluster_waits_for_hyperpod_before_taking_a_node_for_stuck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a node out of Running on a NodeRecovery Automatic cluster may be HyperPod's own repair in progress
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(execute=False, parameters={"MaxUnhealthyPercent": 100}) as stack:
        groups = registered(stack, "c1", running=False, node_recovery="Automatic")  # every node Pending
        environment = stack.environment("HealingSweepFunction")
        stuck_after = timedelta(minutes=HealingSweepSettings.from_environ(environment).stuck_node_minutes)
        hyperpod = timedelta(minutes=settings(stack).hyperpod_repair_deadline_minutes)
        checks = timedelta(minutes=settings(stack).deep_health_check_minutes)
        assert hyperpod > stuck_after

        sweep(stack).run(NOW)
        at_stuck = sweep(stack).run(NOW + stuck_after)
        late = sweep(stack).run(NOW + hyperpod)

        assert "repair_started" not in at_stuck
        # the 4 workers' group runs deep health checks: HyperPod's replacement there is checked ~2 h
        # before it is Running, so only the controller and the login node are taken for stuck yet
        assert late["repair_started"] == 2
        assert {r["nodeId"] for r in repairs(stack)} == {
            *groups["controller-machine"],
            *groups["login-group"],
        }
        # a second cluster swept past both: every node (c1's workers now look like the successors of
        # the repairs open there, which the sweep leaves to those repairs)
        registered(stack, "c2", running=False, node_recovery="Automatic")
        sweep(stack).run(NOW)
        checked = sweep(stack).run(NOW + hyperpod + checks)
        assert checked["repair_started"] == 6


def test_the_breaker_trips_on_the_sweeps_own_findings(stack: Deployed) -> None:
    groups = registered(stack, "c1")
    for node in groups["worker-group-1"]:
        fail_node(stack, "c1", node)

    outcomes = sweep(stack).run(NOW)

    state = healing(stack).get_healing("c1")
    assert state.paused
    assert state.paused_by == "breaker"
    # 2 of 6 nodes are over 20%: the first finding started, the second tripped the breaker
    assert outcomes["repair_started"] == 1
    assert outcomes["unhealthy_while_paused"] == 3
    assert len(repairs(stack)) == 1
    kinds = [e["detail-type"] for e in stack.operation_events()]
    assert kinds.count("Healing Paused") == 1


def test_an_automatic_cluster_waits_for_hyperpods_own_repair(stack: Deployed) -> None:
    node = registered(stack, "c1", node_recovery="Automatic")["worker-group-1"][0]
    reported = NOW
    healing(stack).record_health("c1", node, NodeHealth.UNHEALTHY, reason="fault type X", at=reported)
    # the node's group runs OnStartDeepHealthChecks: HyperPod's own replacement spends ~2 h in checks
    # before Running, so Autopilot steps in only past HyperPodRepairDeadlineMinutes + DeepHealthCheckMinutes
    deadline = timedelta(
        minutes=settings(stack).hyperpod_repair_deadline_minutes + settings(stack).deep_health_check_minutes
    )

    assert "repair_started" not in sweep(stack).run(
        reported + timedelta(minutes=settings(stack).hyperpod_repair_deadline_minutes)
    )
    assert "repair_started" not in sweep(stack).run(reported + deadline - timedelta(minutes=1))
    after = sweep(stack).run(reported + deadline)

    assert after["repair_started"] == 1
    [workflow_input] = repairs(stack)
    assert workflow_input["fault"]["detectedAt"] == iso(reported)  # the event's fault, claimed once


def test_a_repair_waiting_for_a_slot_is_not_overdue(stack: Deployed) -> None:
    # A storm's backlog (or a paused cluster) waits for its slot; the deadlines run from the slot on.
    node = registered(stack, "c1")["worker-group-1"][0]
    operation = event_repair(stack, node, NodeAction.REPLACE, "NvidiaErrorTerminate")
    assert operation is not None
    deadline = repair_deadline(settings(stack))

    sweep(stack).run(NOW)
    outcomes = sweep(stack).run(NOW + 2 * deadline)

    assert "overdue_failed" not in outcomes
    waiting = healing(stack).get_operation(operation.operation_id)
    assert waiting is not None
    assert waiting.status is OperationStatus.RUNNING


def test_repairs_past_their_deadline_are_failed_stopped_released_and_announced(stack: Deployed) -> None:
    node = registered(stack, "c1")["worker-group-1"][0]
    table_ = healing(stack)
    operation = event_repair(stack, node, NodeAction.REBOOT, "NvidiaErrorReboot")
    assert operation is not None
    table_.dynamodb.update_item(
        TableName=table(stack),
        Key={k: {"S": v} for k, v in healing_key("c1").items()},
        UpdateExpression="ADD leaseHolders :op",
        ExpressionAttributeValues={":op": {"SS": [operation.operation_id]}},
    )
    deadline = repair_deadline(settings(stack))

    assert "overdue_failed" not in sweep(stack).run(NOW)  # first seen RUNNING: the deadline counts from here
    assert "overdue_failed" not in sweep(stack).run(NOW + deadline - timedelta(minutes=1))
    outcomes = sweep(stack).run(NOW + deadline)

    assert outcomes["overdue_failed"] == 1
    failed = table_.get_operation(operation.operation_id)
    assert failed is not None
    assert failed.status is OperationStatus.FAILED
    assert failed.error is not None
    assert failed.error.error == "Autopilot.RepairDeadlineExceeded"
    record = table_.get_node("c1", node)
    assert record is not None
    assert record.open_repair is None
    assert table_.get_healing("c1").lease_holders == set()
    execution = stack.client("stepfunctions").describe_execution(executionArn=failed.execution_arn)
    assert execution["status"] == "ABORTED"
    [event] = [e for e in stack.operation_events() if e["detail-type"] == "Node Repair Failed"]
    assert event["detail"]["operationId"] == operation.operation_id
    # the fault is not repaired again on its own: a person answers the alert
    assert "repair_started" not in sweep(stack).run(NOW + deadline + timedelta(minutes=5))


def test_a_deep_health_nodes_repair_is_overdue_only_past_the_check_allowance(stack: Deployed) -> None:
    # HyperPod's replace observed, then Autopilot's: each new instance spends DeepHealthCheckMinutes in
    # checks, so the longest path of such a repair is the plain deadline plus twice the allowance.
    node = registered(stack, "c1")[DEEP_HEALTH_GROUP][0]
    operation = event_repair(
        stack, node, NodeAction.REPLACE, "NvidiaErrorTerminate", instance_group=DEEP_HEALTH_GROUP
    )
    assert operation is not None
    healing(stack).dynamodb.update_item(
        TableName=table(stack),
        Key={k: {"S": v} for k, v in healing_key("c1").items()},
        UpdateExpression="ADD leaseHolders :op",
        ExpressionAttributeValues={":op": {"SS": [operation.operation_id]}},
    )
    plain = repair_deadline(settings(stack))
    checked = repair_deadline(settings(stack), deep_health_checks=True)
    assert checked - plain == timedelta(minutes=2 * settings(stack).deep_health_check_minutes)

    sweep(stack).run(NOW)
    assert "overdue_failed" not in sweep(stack).run(NOW + plain)
    assert "overdue_failed" not in sweep(stack).run(NOW + checked - timedelta(minutes=1))
    assert sweep(stack).run(NOW + checked)["overdue_failed"] == 1


def test_lease_holders_whose_repair_ended_are_released(stack: Deployed) -> None:
    registered(stack, "c1")
    healing(stack).dynamodb.update_item(
        TableName=table(stack),
        Key={k: {"S": v} for k, v in healing_key("c1").items()},
        UpdateExpression="ADD leaseHolders :op",
        ExpressionAttributeValues={":op": {"SS": ["op-20261122090000-deadbeef"]}},
    )

    outcomes = sweep(stack).run(NOW)

    assert outcomes["leases_released"] == 1
    assert healing(stack).get_healing("c1").lease_holders == set()


def test_a_node_whose_repair_execution_died_is_freed_and_repaired_again(stack: Deployed) -> None:
    node = registered(stack, "c1")["worker-group-1"][0]
    table_ = healing(stack)
    operation = event_repair(stack, node, NodeAction.REBOOT, "NvidiaErrorReboot", at=NOW - timedelta(hours=1))
    assert operation is not None
    # the execution died: RecordOutcome recorded the operation FAILED, nothing touched the node item
    assert StateTable(table(stack), client=stack.client("dynamodb")).fail_running_operation(
        operation,
        OperationError(error="Autopilot.ExecutionAborted", cause="stopped"),
        cluster_status=ClusterStatus.ACTIVE,
        sagemaker_status=None,
        now=NOW,
    )
    fail_node(stack, "c1", node)  # and the node is still faulty

    outcomes = sweep(stack).run(NOW)

    assert outcomes["nodes_freed"] == 1
    assert outcomes["repair_started"] == 1
    record = table_.get_node("c1", node)
    assert record is not None
    assert record.open_repair not in (None, operation.operation_id)


class ThrottledFor:
    """The SageMaker client, throttled (after boto3's retries) for one cluster's node listing."""

    def __init__(self, client: Any, cluster: str) -> None:
        self._client = client
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def list_cluster_nodes(self, **kwargs: Any) -> Any:
        if kwargs["ClusterName"] == self._cluster:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "ListClusterNodes"
            )
        return self._client.list_cluster_nodes(**kwargs)


def test_one_cluster_failing_does_not_stop_the_others(stack: Deployed) -> None:
    registered(stack, "a-throttled")
    node = registered(stack, "b-fine")["worker-group-1"][0]
    fail_node(stack, "b-fine", node)

    with pytest.raises(SweepIncompleteError, match="a-throttled"):
        sweep(stack, sagemaker=ThrottledFor(stack.client("sagemaker"), "a-throttled")).run(NOW)

    assert [r["nodeId"] for r in repairs(stack)] == [node]


def test_the_new_instance_of_a_replace_in_flight_is_not_taken_for_a_stuck_node(stack: Deployed) -> None:
    worker = registered(stack, "c1")["worker-group-1"][0]
    operation = event_repair(stack, worker, NodeAction.REPLACE, "NvidiaErrorTerminate")
    assert operation is not None
    # the workflow's replace: the successor stays Pending while HyperPod launches it
    stack.client("sagemaker").batch_replace_cluster_nodes(ClusterName="c1", NodeIds=[worker])
    environment = stack.environment("HealingSweepFunction")
    stuck_after = timedelta(minutes=HealingSweepSettings.from_environ(environment).stuck_node_minutes)

    sweep(stack).run(NOW)
    late = sweep(stack).run(NOW + stuck_after)

    assert "repair_started" not in late
    assert [r["operationId"] for r in repairs(stack)] == [operation.operation_id]


def test_an_hma_fault_whose_event_was_dead_lettered_after_its_report_is_repaired(stack: Deployed) -> None:
    # issue 20, finding 9: a GPU fault HMA reports leaves the instance Running, so SageMaker's statuses
    # never show it; when ClusterEventsFunction held the report and then failed (its message went to the
    # dead-letter queue), the report is what the sweep repairs from
    node = registered(stack, "c1")["worker-group-1"][0]
    stack.hyperpod.fault_node_unhealthy("c1", node, fault_type="NvidiaErrorTerminate", auto_recover=False)
    reason = (
        "HyperPod Health Monitoring Agent (HMA) has detected fault type NvidiaErrorTerminate on this node"
    )
    healing(stack).record_health("c1", node, NodeHealth.UNHEALTHY, reason=reason, at=NOW)
    statuses = stack.client("sagemaker").list_cluster_nodes(ClusterName="c1")["ClusterNodeSummaries"]
    assert {n["InstanceStatus"]["Status"] for n in statuses} == {"Running"}  # nothing else shows it

    first = sweep(stack).run(NOW + timedelta(minutes=5))
    again = sweep(stack).run(NOW + timedelta(minutes=10))

    assert first["repair_started"] == 1
    assert "repair_started" not in again
    [workflow_input] = repairs(stack)
    assert (workflow_input["nodeId"], workflow_input["trigger"]) == (node, "sweep")
