"""Slurm as a signal, on the template deployed into moto with the HyperPod simulator (workflows recorded,
not executed): the agent's reports go through AgentFunction's logic (logic/agent/reports.py; who may
report is trust.py's, tested on its own), the sweep acts on the latest — a node down only for a reboot
is resumed once, one not responding past StuckNodeMinutes is repaired once, an operator's drain is
left alone."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from autopilot import aws
from autopilot.dal.agent import AgentTable
from autopilot.dal.repair_watch import RepairWatch
from autopilot.dal.state_table import StateTable
from autopilot.dal.stuck_nodes import StuckNodes
from autopilot.logic.agent.reports import AgentDeps, handle_report
from autopilot.logic.agent.trust import Controller, ControllerReader
from autopilot.logic.healing.slurm_signal import SlurmSignal
from autopilot.logic.healing.sweep import HealingSweep
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.agent import CommandStatus
from autopilot.models.records import (
    Operation,
    OperationError,
    OperationStatus,
    OperationType,
    iso,
    new_operation_id,
)
from autopilot.settings import HealingSweepSettings, healing_settings, healing_sweep_settings

from sandbox.emulator.sqs import MessageMoves
from sandbox.harness.stack import ACCOUNT, Deployed, deployed
from tests.integration.test_healing_sweep import fail_node, healing, registered, repairs, settings, table
from tests.samples import ROOT, load_event

T0 = datetime(2026, 11, 22, 10, 0, 0).astimezone()
CALLER = f"arn:aws:sts::{ACCOUNT}:assumed-role/controller-role/i-0controller"
REBOOTED = "Node unexpectedly rebooted"
CONTEXT = {
    "function_name": "HealingSweepFunction",
    "memory_limit_in_mb": 256,
    "invoked_function_arn": f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:HealingSweepFunction",
    "aws_request_id": "00000000-0000-4000-8000-000000000000",
}


class GivenController(ControllerReader):
    """The cluster's controller as trust.py would find it (its own tests read DescribeCluster)."""

    def controller(self, cluster_name: str) -> Controller:
        return Controller(group="controller-machine", role_arn=f"arn:aws:iam::{ACCOUNT}:role/controller-role")

    def instances(self, cluster_name: str, group: str) -> frozenset[str]:
        return frozenset({"i-0controller"})

    def describe(self, cluster_name: str) -> dict[str, Any]:
        return {"ClusterName": cluster_name, "Orchestrator": {"Slurm": {}}}


class World:
    """c1 registered with its nodes Running, its agent, and the sweep as HealingSweepFunction builds it."""

    def __init__(self, stack: Deployed) -> None:
        self.stack = stack
        self.workers = registered(stack, "c1")["worker-group-1"]
        nodes = stack.client("sagemaker").list_cluster_nodes(ClusterName="c1")["ClusterNodeSummaries"]
        # Slurm's name of a HyperPod node: the first label of its PrivateDnsHostname
        self.slurm = {n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0] for n in nodes}
        self.agents = AgentTable(table(stack), dynamodb=stack.client("dynamodb"))
        environment = HealingSweepSettings.from_environ(stack.environment("HealingSweepFunction"))
        self.sweep_settings = environment
        self.now = T0

    def report(self, at: datetime, states: dict[str, tuple[str, str]], *results: dict[str, Any]) -> list[Any]:
        """The agent's report at ``at``: each worker IDLE unless ``states`` says (node id -> state,
        reason); the commands in the answer."""
        self.now = at
        deps = AgentDeps(
            agents=self.agents,
            controllers=GivenController(),
            stepfunctions=self.stack.client("stepfunctions"),
            poll_seconds=self.sweep_settings.agent_poll_seconds,
            account=ACCOUNT,
            now=lambda: self.now,
        )
        nodes = [
            {
                "name": self.slurm[w],
                "state": states.get(w, ("IDLE", ""))[0],
                "reason": states.get(w, ("", ""))[1],
            }
            for w in self.workers
        ]
        body = {"agentVersion": "1.0.0", "sentAt": iso(at), "nodes": nodes, "results": list(results)}
        return list(handle_report(deps, "c1", CALLER, body)["commands"])

    def sweep(self, at: datetime) -> dict[str, int]:
        stack = self.stack
        client = stack.client("sagemaker")
        dynamodb = stack.client("dynamodb")
        return HealingSweep(
            store=StateTable(table(stack), client=dynamodb),
            healing=healing(stack),
            stuck=StuckNodes(table(stack), dynamodb=dynamodb),
            watch=RepairWatch(table(stack), dynamodb=dynamodb),
            topology=TopologyReader(sagemaker=client, s3=stack.client("s3")),
            sagemaker=client,
            stepfunctions=stack.client("stepfunctions"),
            events=stack.client("events"),
            sns=stack.client("sns"),
            settings=settings(stack),
            stuck_node_minutes=self.sweep_settings.stuck_node_minutes,
            slurm=SlurmSignal(
                agents=self.agents,
                operations=StateTable(table(stack), client=dynamodb),
                events=stack.client("events"),
                poll_seconds=self.sweep_settings.agent_poll_seconds,
                not_responding_after=timedelta(minutes=self.sweep_settings.stuck_node_minutes),
            ),
        ).run(at)

    @property
    def stuck_after(self) -> timedelta:
        return timedelta(minutes=self.sweep_settings.stuck_node_minutes)

    def repair(self, node: str, at: datetime, *, ended: datetime | None = None) -> str:
        """A ReplaceNode operation of ``node`` claimed at ``at`` (its history entry with it) and, with
        ``ended``, recorded FAILED then and the node freed, as the workflow's end leaves them."""
        operation = Operation(
            operation_id=new_operation_id(at),
            operation_type=OperationType.REPLACE_NODE,
            cluster_name="c1",
            status=OperationStatus.RUNNING,
            created_at=at,
            updated_at=at,
            node_id=node,
        )
        repairs_table = healing(self.stack)
        assert repairs_table.claim_repair(operation, fault_at=at)
        if ended is not None:
            error = OperationError(error="Autopilot.AgentCommandFailed", cause="the drain's result came late")
            repairs_table.fail_unstarted_repair(operation, error, previous_fault_at=None, now=ended)
        return operation.operation_id


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(execute=False) as stack:
        yield World(stack)


def test_a_node_down_only_for_a_reboot_is_resumed_once(world: World) -> None:
    node = world.workers[0]
    world.repair(node, T0 - timedelta(minutes=30), ended=T0 - timedelta(minutes=5))  # it rebooted the node
    rebooted = {node: ("DOWN", REBOOTED)}
    world.report(T0, rebooted)

    first = world.sweep(T0 + timedelta(seconds=20))
    [command] = world.report(T0 + timedelta(seconds=30), rebooted)
    # the next sweep, on a newer report still showing the node down (the agent has not resumed it
    # yet): the resume is pending, none is added
    world.report(T0 + timedelta(minutes=5), rebooted)
    again = world.sweep(T0 + timedelta(minutes=5, seconds=5))
    pending = world.report(T0 + timedelta(minutes=5, seconds=10), rebooted)

    assert first["slurm_resumes_queued"] == 1
    assert "slurm_resumes_queued" not in again
    assert (command["verb"], command["node"]) == ("resume", world.slurm[node])
    assert "reason" not in command
    assert command["expect"] == {"reasonPrefix": REBOOTED}  # the agent leaves a node drained since
    assert pending == [command]
    assert repairs(world.stack) == []  # a resume, not a repair
    [event] = [e for e in world.stack.operation_events() if e["detail-type"] == "Slurm Node Resume Requested"]
    assert event["detail"]["nodeId"] == node
    assert event["detail"]["slurmReason"] == REBOOTED

    # the agent's result ends it: nothing waits on its token, it only leaves the list
    result = {
        "commandId": command["commandId"],
        "ok": True,
        "detail": {"node": {"name": world.slurm[node], "state": "IDLE"}},
    }
    assert world.report(T0 + timedelta(minutes=5, seconds=20), {}, result) == []
    stored = world.agents.command("c1", command["commandId"])
    assert stored is not None
    assert stored.status is CommandStatus.DONE


def test_nothing_is_resumed_on_a_silent_agents_word_or_while_a_repair_holds_the_node(world: World) -> None:
    first, second = world.workers[:2]
    world.repair(first, T0 - timedelta(minutes=30), ended=T0 - timedelta(minutes=5))
    world.report(T0, {first: ("DOWN", REBOOTED), second: ("DOWN", REBOOTED)})
    # silent: no report for max(60 s, 3 polls)
    assert "slurm_resumes_queued" not in world.sweep(T0 + timedelta(minutes=2))

    fail_node(world.stack, "c1", second)  # the sweep's usual path repairs it; the workflow resumes it
    world.report(T0 + timedelta(minutes=3), {first: ("DOWN", REBOOTED), second: ("DOWN", REBOOTED)})
    outcomes = world.sweep(T0 + timedelta(minutes=3, seconds=5))

    assert outcomes["repair_started"] == 1
    assert outcomes["slurm_resumes_queued"] == 1
    [command] = world.report(T0 + timedelta(minutes=3, seconds=10), {first: ("DOWN", REBOOTED)})
    assert command["node"] == world.slurm[first]


def test_a_node_not_responding_past_stuck_node_minutes_is_repaired_once(world: World) -> None:
    node = world.workers[0]
    silent = {node: ("DOWN+NOT_RESPONDING", "Not responding")}
    world.report(T0, silent)
    # reported again and again: the first sighting stays, on the product clock
    world.report(T0 + world.stuck_after / 2, silent)
    assert "repair_started" not in world.sweep(T0 + world.stuck_after / 2 + timedelta(seconds=5))

    world.report(T0 + world.stuck_after, silent)
    first = world.sweep(T0 + world.stuck_after + timedelta(seconds=5))
    world.report(T0 + world.stuck_after + timedelta(minutes=5), silent)
    again = world.sweep(T0 + world.stuck_after + timedelta(minutes=5, seconds=5))

    assert first["repair_started"] == 1
    assert "repair_started" not in again
    [workflow_input] = repairs(world.stack)
    assert (workflow_input["nodeId"], workflow_input["trigger"], workflow_input["action"]) == (
        node,
        "sweep",
        "reboot",
    )
    assert workflow_input["fault"]["faultType"] == "SlurmNotResponding"
    assert workflow_input["fault"]["detectedAt"] == iso(T0)
    record = healing(world.stack).get_node("c1", node)
    assert record is not None
    assert record.open_repair == workflow_input["operationId"]
    # GET .../nodes shows why
    assert "SlurmNotResponding" in (record.health_reason or "")


def test_a_silence_that_ended_starts_its_count_again(world: World) -> None:
    node = world.workers[0]
    world.report(T0, {node: ("DOWN+NOT_RESPONDING", "Not responding")})
    world.report(T0 + timedelta(minutes=20), {node: ("DOWN", "Not responding")})  # it answered
    world.report(T0 + timedelta(minutes=25), {node: ("IDLE+NOT_RESPONDING", "")})
    world.report(T0 + world.stuck_after + timedelta(minutes=1), {node: ("IDLE+NOT_RESPONDING", "")})

    assert "repair_started" not in world.sweep(T0 + world.stuck_after + timedelta(minutes=1, seconds=5))


def test_an_operators_drain_is_left_alone_but_sagemakers_faults_are_not(world: World) -> None:
    drained_silent, drained_rebooted, drained_failed = world.workers[:3]
    states = {
        drained_silent: ("DOWN+DRAIN+NOT_RESPONDING", "RMA 4711: bad HCA"),
        drained_rebooted: ("DOWN+DRAIN", REBOOTED),
        drained_failed: ("IDLE+DRAIN", "maintenance window"),
    }
    world.report(T0, states)
    fail_node(world.stack, "c1", drained_failed)  # SageMaker's own fault of a drained node

    later = T0 + 4 * world.stuck_after
    world.report(later, states)
    outcomes = world.sweep(later + timedelta(seconds=5))

    assert outcomes["repair_started"] == 1
    assert "slurm_resumes_queued" not in outcomes
    assert [r["nodeId"] for r in repairs(world.stack)] == [drained_failed]
    assert world.report(later + timedelta(seconds=10), states) == []


@pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
def test_the_sweep_function_acts_on_the_agents_report(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """functions/healing_sweep/app.py with HealingSweepFunction's environment from the template: its
    schedule's run reads the agent's report and queues the resume."""
    for key, value in world.stack.environment("HealingSweepFunction").items():
        monkeypatch.setenv(key, value)
    healing_settings.cache_clear()
    healing_sweep_settings.cache_clear()
    aws.client.cache_clear()
    spec = importlib.util.spec_from_file_location(
        "healing_sweep_app", ROOT / "functions/healing_sweep/app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    function = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(function)
    event = load_event("schedule/scheduled_event.json")
    node = world.workers[0]
    world.repair(node, datetime.fromisoformat(event["time"]) - timedelta(hours=1), ended=T0)
    world.report(datetime.fromisoformat(event["time"]) - timedelta(seconds=5), {node: ("DOWN", REBOOTED)})

    moves = MessageMoves(
        lambda: datetime.fromisoformat(event["time"])
    )  # the run's DLQ redrive (moto lacks it)
    moves.install()
    try:
        outcomes = function.lambda_handler(event, SimpleNamespace(**CONTEXT))
    finally:
        moves.uninstall()

    assert outcomes["slurm_resumes_queued"] == 1
    [command] = world.report(datetime.fromisoformat(event["time"]), {node: ("DOWN", REBOOTED)})
    assert (command["verb"], command["node"]) == ("resume", world.slurm[node])


def test_a_reboot_no_repair_of_the_node_explains_is_left_to_the_operator(world: World) -> None:
    # c1 is NodeRecovery None: HyperPod reboots nothing on its own, so a node down "unexpectedly
    # rebooted" with no repair of it in the last 24 hours was rebooted by someone else (or panicked)
    manual, long_ago, other = world.workers[:3]
    world.repair(long_ago, T0 - timedelta(hours=30), ended=T0 - timedelta(hours=24, minutes=1))
    world.repair(world.workers[3], T0 - timedelta(hours=1), ended=T0 - timedelta(minutes=30))
    states = {n: ("DOWN", REBOOTED) for n in (manual, long_ago, other)}
    world.report(T0, states)

    outcomes = world.sweep(T0 + timedelta(seconds=5))

    assert "slurm_resumes_queued" not in outcomes
    assert world.report(T0 + timedelta(seconds=10), states) == []


def test_a_drain_left_by_a_repair_that_ended_is_resumed_once(world: World) -> None:
    # the repair drained the node, stopped waiting for the drain's result (late), and ended: its drain
    # stays, and the sweep skips every other DRAIN
    node = world.workers[0]
    operation = world.repair(node, T0 - timedelta(minutes=40))
    drained = {node: ("IDLE+DRAIN", f"autopilot {operation}: reboot (NvidiaErrorReboot)")}
    world.report(T0, drained)
    assert "slurm_resumes_queued" not in world.sweep(T0 + timedelta(seconds=5))  # still RUNNING

    healing(world.stack).fail_unstarted_repair(
        healing(world.stack).get_operation(operation),  # type: ignore[arg-type]
        OperationError(error="Autopilot.AgentCommandFailed", cause="deadline"),
        previous_fault_at=None,
        now=T0 + timedelta(minutes=1),
    )
    world.report(T0 + timedelta(minutes=2), drained)
    first = world.sweep(T0 + timedelta(minutes=2, seconds=5))
    world.report(T0 + timedelta(minutes=3), drained)
    again = world.sweep(T0 + timedelta(minutes=3, seconds=5))
    [command] = world.report(T0 + timedelta(minutes=3, seconds=10), drained)

    assert first["slurm_resumes_queued"] == 1
    assert "slurm_resumes_queued" not in again  # one pending at a time
    assert (command["verb"], command["node"]) == ("resume", world.slurm[node])
    assert command["expect"] == {"reasonPrefix": f"autopilot {operation}:"}
    assert repairs(world.stack) == []


def test_a_cluster_wide_silence_is_stored_without_first_sightings(world: World) -> None:
    # 2,500 nodes not responding at once: their views fit DynamoDB's item, their first sightings too
    # would not (the report would fail and the agent look silent); none is repaired on Slurm's word
    names = [f"ip-10-2-{i // 250}-{i % 250}" for i in range(2500)]
    silent = {"state": "DOWN+NOT_RESPONDING", "reason": "Not responding", "gpus": 8}
    deps = AgentDeps(
        agents=world.agents,
        controllers=GivenController(),
        stepfunctions=world.stack.client("stepfunctions"),
        poll_seconds=world.sweep_settings.agent_poll_seconds,
        account=ACCOUNT,
        now=lambda: T0,
    )
    body = {"agentVersion": "1.0.0", "sentAt": iso(T0), "nodes": [{"name": n, **silent} for n in names]}

    handle_report(deps, "c1", CALLER, body)

    stored = world.agents.agent("c1")
    assert stored is not None
    assert len(stored.nodes) == 2500
    assert stored.not_responding_since == {}
