"""A workflow's command for the Slurm agent, end to end on moto: a real Step Functions task waits on
its token (moto's executor), the command is queued (autopilot.logic.agent.commands), handed to the
agent in the answer to its report, and the agent's result ends the task (reports.py) — success with its
detail, AgentCommandFailed, or NodeNotBackInSlurm when a resumed node is not schedulable with its GPUs.

Who may report is trust.py's (tests/unit/test_report_trust.py): here the controller is given."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from autopilot.dal.agent import AgentTable
from autopilot.logic.agent.commands import enqueue_command
from autopilot.logic.agent.reports import AgentDeps, InvalidReportError, handle_report
from autopilot.logic.agent.status import workflow_status
from autopilot.logic.agent.trust import Controller, ControllerReader
from autopilot.models.agent import CommandRequest
from moto import mock_aws

from sandbox.emulator import seams
from tests.samples.state_table import create_state_table

REGION = "us-east-1"
ACCOUNT = "123456789012"
CLUSTER = "ml-cluster"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/ml-cluster-controller"
CALLER = f"arn:aws:sts::{ACCOUNT}:assumed-role/ml-cluster-controller/i-0a1b2c3d4e5f60718"
T0 = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
# One task waiting on its token, as ReplaceNodeStateMachine's agent steps do (there the token goes to
# AgentFunction by lambda:invoke.waitForTaskToken; here to a queue the test reads it from).
WAITING = {
    "StartAt": "Agent Command",
    "States": {
        "Agent Command": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
            "Parameters": {"QueueUrl": "", "MessageBody": {"token.$": "$$.Task.Token"}},
            "End": True,
        }
    },
}


class GivenController(ControllerReader):
    """The cluster's controller as DescribeCluster would name it (trust.py's own tests read it)."""

    def controller(self, cluster_name: str) -> Controller:
        return Controller(group="controller-machine", role_arn=ROLE)

    def instances(self, cluster_name: str, group: str) -> frozenset[str]:
        return frozenset({"i-0a1b2c3d4e5f60718"})

    def describe(self, cluster_name: str) -> dict[str, Any]:
        return {"ClusterName": cluster_name, "Orchestrator": {"Slurm": {}}}


class World:
    def __init__(self) -> None:
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_state_table(dynamodb)
        self.sfn = boto3.client("stepfunctions", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.queue = self.sqs.create_queue(QueueName="tokens")["QueueUrl"]
        definition = json.loads(json.dumps(WAITING))
        definition["States"]["Agent Command"]["Parameters"]["QueueUrl"] = self.queue
        self.machine = self.sfn.create_state_machine(
            name="agent-command",
            definition=json.dumps(definition),
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/states",
        )["stateMachineArn"]
        self.now = T0
        self.deps = AgentDeps(
            agents=AgentTable("state", dynamodb=dynamodb),
            controllers=GivenController(),
            stepfunctions=self.sfn,
            poll_seconds=10,
            account=ACCOUNT,
            now=lambda: self.now,
        )

    def waiting_task(self) -> tuple[str, str]:
        """A started execution and the token of its waiting task."""
        execution = self.sfn.start_execution(stateMachineArn=self.machine)["executionArn"]
        for _ in range(200):
            messages = self.sqs.receive_message(QueueUrl=self.queue).get("Messages", [])
            if messages:
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=messages[0]["ReceiptHandle"])
                return execution, json.loads(messages[0]["Body"])["token"]
            time.sleep(0.02)
        raise AssertionError("the task never sent its token")

    def command(self, verb: str, token: str, **fields: Any) -> str:
        request = CommandRequest.model_validate(
            {
                "clusterName": CLUSTER,
                "node": "ip-10-1-2-3",
                "verb": verb,
                "operationId": "op-1",
                "timeoutSeconds": 3600,
                "taskToken": token,
                **fields,
            }
        )
        return str(enqueue_command(self.deps.agents, request, now=self.now)["commandId"])

    def report(self, *results: dict[str, Any], caller: str = CALLER) -> dict[str, Any]:
        body = {
            "agentVersion": "1.0.0",
            "sentAt": "2026-11-27T21:00:00.000Z",
            "nodes": [],
            "results": list(results),
        }
        return handle_report(self.deps, CLUSTER, caller, body)

    def ended(self, execution: str) -> dict[str, Any]:
        for _ in range(200):
            described = self.sfn.describe_execution(executionArn=execution)
            if described["status"] != "RUNNING":
                return dict(described)
            time.sleep(0.02)
        raise AssertionError("the execution is still running")


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with (
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
        seams.installed(seams.keep_task_failure_cause),  # moto drops SendTaskFailure's cause
    ):
        yield World()


def node_view(state: str = "IDLE", gpus: int = 8, name: str = "ip-10-1-2-3") -> dict[str, Any]:
    return {"name": name, "state": state, "reason": "", "gpus": gpus, "jobs": []}


def test_a_drain_is_handed_to_the_agent_and_its_result_ends_the_task(world: World) -> None:
    execution, token = world.waiting_task()
    command_id = world.command("drain", token, reason="autopilot op-1: replace (NvidiaErrorTerminate)")

    answer = world.report()
    assert answer == {
        "commands": [
            {
                "commandId": command_id,
                "verb": "drain",
                "node": "ip-10-1-2-3",
                "reason": "autopilot op-1: replace (NvidiaErrorTerminate)",
                "deadline": "2026-11-27T22:00:00.000Z",
            }
        ],
        "pollSeconds": 10,
    }
    detail = {"node": node_view("IDLE+DRAIN")}
    assert world.report({"commandId": command_id, "ok": True, "error": None, "detail": detail}) == {
        "commands": [],
        "pollSeconds": 10,
    }
    ended = world.ended(execution)
    assert ended["status"] == "SUCCEEDED"
    assert json.loads(ended["output"]) == {**detail, "ok": True}
    # the agent repeats a result it has not seen acknowledged: nothing happens twice
    assert world.report({"commandId": command_id, "ok": True, "detail": detail})["commands"] == []


def test_an_agents_failure_fails_the_task_with_its_error(world: World) -> None:
    execution, token = world.waiting_task()
    command_id = world.command("requeue", token)
    world.report({"commandId": command_id, "ok": False, "error": "unknown node"})
    ended = world.ended(execution)
    assert (ended["status"], ended["error"], ended["cause"]) == (
        "FAILED",
        "Autopilot.AgentCommandFailed",
        "unknown node",
    )


@pytest.mark.parametrize(
    ("view", "cause"),
    [
        (node_view("IDLE", gpus=4), "shows 4 GPUs in Slurm, 8 expected"),
        (node_view("DOWN+NOT_RESPONDING"), "is DOWN+NOT_RESPONDING in Slurm"),
        (node_view("IDLE+DRAIN"), "is IDLE+DRAIN in Slurm"),
        (node_view("MIXED+FAIL"), "is MIXED+FAIL in Slurm"),
        (node_view(name="ip-10-9-9-9"), "is for ip-10-9-9-9"),
        (None, "carries no node view"),
    ],
)
def test_a_resumed_node_not_schedulable_with_its_gpus_fails_the_repair(
    world: World, view: dict[str, Any] | None, cause: str
) -> None:
    execution, token = world.waiting_task()
    command_id = world.command("resume", token, instanceType="ml.p5.48xlarge")
    world.report({"commandId": command_id, "ok": True, "detail": {"node": view} if view else {}})
    ended = world.ended(execution)
    assert (ended["status"], ended["error"]) == ("FAILED", "Autopilot.NodeNotBackInSlurm")
    assert cause in ended["cause"]


@pytest.mark.parametrize("state", ["IDLE", "MIXED", "ALLOCATED", "ALLOCATED+COMPLETING"])
def test_a_node_back_in_slurm_with_its_gpus_completes_the_resume(world: World, state: str) -> None:
    execution, token = world.waiting_task()
    command_id = world.command("resume", token, instanceType="ml.p5.48xlarge")
    world.report({"commandId": command_id, "ok": True, "detail": {"node": node_view(state)}})
    assert world.ended(execution)["status"] == "SUCCEEDED"


def test_a_result_for_a_task_that_no_longer_waits_is_not_an_error(world: World) -> None:
    execution, token = world.waiting_task()
    command_id = world.command("await_idle", token)
    world.sfn.stop_execution(executionArn=execution)
    world.report({"commandId": command_id, "ok": True, "detail": {"node": node_view()}})
    assert world.report()["commands"] == []


def test_a_command_past_its_deadline_is_no_longer_handed_out(world: World) -> None:
    _, token = world.waiting_task()
    world.command("await_idle", token, timeoutSeconds=60)
    assert len(world.report()["commands"]) == 1
    world.now = T0 + timedelta(seconds=61)
    assert world.report()["commands"] == []


def test_a_retried_invoke_queues_the_command_once(world: World) -> None:
    _, token = world.waiting_task()
    first = world.command("await_idle", token)
    assert world.command("await_idle", token) == first
    assert [c["commandId"] for c in world.report()["commands"]] == [first]


def test_a_report_stores_the_latest_view_for_the_status(world: World) -> None:
    assert workflow_status(world.deps.agents, world.deps.controllers, CLUSTER, now=T0, poll_seconds=10) == {
        "status": "absent",
        "lastSeen": None,
        "version": None,
        "slurm": True,
        "nodes": {},
    }
    body = {
        "agentVersion": "1.0.0",
        "sentAt": "2020-01-01T00:00:00.000Z",  # the agent's clock is not the one that counts
        "nodes": [node_view("MIXED", name="ip-10-1-2-3"), node_view("IDLE", name="ip-10-1-2-4")],
    }
    handle_report(world.deps, CLUSTER, CALLER, body)
    status = workflow_status(
        world.deps.agents, world.deps.controllers, CLUSTER, now=T0 + timedelta(seconds=60), poll_seconds=10
    )
    assert (status["status"], status["lastSeen"], status["version"]) == (
        "connected",
        "2026-11-27T21:00:00.000Z",
        "1.0.0",
    )
    assert status["nodes"]["ip-10-1-2-3"] == node_view("MIXED")
    one = workflow_status(
        world.deps.agents, world.deps.controllers, CLUSTER, now=T0, poll_seconds=10, node="ip-10-1-2-4"
    )
    assert list(one["nodes"]) == ["ip-10-1-2-4"]
    later = T0 + timedelta(seconds=61)  # AgentSilentSeconds = max(60, 3 x 10)
    assert (
        workflow_status(world.deps.agents, world.deps.controllers, CLUSTER, now=later, poll_seconds=10)[
            "status"
        ]
        == "silent"
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sentAt": "x"}, "agentVersion"),
        (
            {"agentVersion": "1", "sentAt": "x", "nodes": [{"name": "ip-1;rm -rf /", "state": "IDLE"}]},
            "nodes.0.name",
        ),
        ({"agentVersion": "1", "sentAt": "x", "results": [{"commandId": "c"}]}, "results.0.ok"),
        ({"agentVersion": "1", "sentAt": "x", "extra": 1}, "extra"),
        (["not", "an", "object"], "JSON object"),
    ],
)
def test_a_malformed_report_names_the_field_and_stores_nothing(world: World, body: Any, field: str) -> None:
    with pytest.raises(InvalidReportError, match=field.replace(".", r"\.")):
        handle_report(world.deps, CLUSTER, CALLER, body)
    assert world.deps.agents.agent(CLUSTER) is None


def test_a_report_larger_than_a_dynamodb_item_is_stored_with_fewer_jobs(world: World) -> None:
    # 2,000 busy nodes: ~1 MB as reported, over DynamoDB's 400 KB item
    nodes = [
        {
            **node_view("ALLOCATED", name=f"ip-10-1-{i // 250}-{i % 250}"),
            "jobs": [str(100000 + j) for j in range(60)],
        }
        for i in range(2000)
    ]
    body = {"agentVersion": "1.0.0", "sentAt": "2026-11-27T21:00:00.000Z", "nodes": nodes}
    handle_report(world.deps, CLUSTER, CALLER, body)
    stored = world.deps.agents.agent(CLUSTER)
    assert stored is not None
    assert len(stored.nodes) == 2000
    assert {n.state for n in stored.nodes.values()} == {"ALLOCATED"}
    assert max(len(n.jobs) for n in stored.nodes.values()) < 60
