"""The Slurm-aware ReplaceNode workflow (issue 21): drain → wait for the jobs → requeue → reboot /
replace → resume, on moto's Step Functions executor against the HyperPod simulator.

The workflow calls the real AgentFunction (in-process, through Lambda's invoke). The cluster's agent
is played through AgentFunction's own report path (``autopilot.logic.agent.reports.handle_report``,
signed as the controller group's execution role, as API Gateway passes it on): each round it reports
the nodes as the test's Slurm holds them, runs the commands the answer carries the way the agent's
verbs do (docs/agent.md), and sends their results, which complete the workflow's tasks. Only Slurm
itself is a model here (a dict per node); tests/sandbox runs the agent against real Slurm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from autopilot.dal.agent import AgentTable
from autopilot.logic.agent.reports import AgentDeps, handle_report
from autopilot.logic.agent.trust import ControllerReader
from autopilot.logic.healing.decide import gpus_lost
from autopilot.models.records import Fault, NodeAction, OperationStatus, iso

from sandbox.harness.stack import ACCOUNT, Deployed
from tests.integration.replace_node_support import (
    CLUSTER,
    CONTROLLER,
    WORKERS,
    assert_released,
    fault,
    make_cluster,
    operation_of,
    run,
    start_repair,
)
from tests.integration.test_asl_replace_node_moving import eks_continuous_cluster
from tests.integration.workflows import entered, history
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
DRAIN_MINUTES = 5  # DrainTimeoutMinutes of these stacks: the wait for the jobs in five rounds
SHORT_DRAIN = {"DrainTimeoutMinutes": DRAIN_MINUTES}
# ml.p5.48xlarge, the workers' instance type (models/instance_types.py)
GPUS = 8
JOB = "1234"


def slurm_name(hostname: str) -> str:
    """HyperPod's Slurm node name: the first label of the node's PrivateDnsHostname."""
    return hostname.split(".", 1)[0]


@dataclass
class SlurmNode:
    state: str = "IDLE"
    reason: str = ""
    gpus: int = GPUS
    jobs: list[str] = field(default_factory=list)

    def view(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "state": self.state,
            "reason": self.reason,
            "gpus": self.gpus,
            "jobs": self.jobs,
        }


class PlayedAgent:
    """The cluster's agent, through AgentFunction's real report path (see the module's docstring)."""

    def __init__(self, stack: Deployed, controller_id: str) -> None:
        self.stack = stack
        self.deps = AgentDeps(
            agents=AgentTable(stack.stack.physical_id("StateTable"), dynamodb=stack.client("dynamodb")),
            controllers=ControllerReader(sagemaker=stack.client("sagemaker"), s3=stack.client("s3")),
            stepfunctions=stack.client("stepfunctions"),
            poll_seconds=10,
            account=ACCOUNT,
            now=stack.clock.now,
        )
        role = create_body()["clusterConfig"]["InstanceGroups"][0]["ExecutionRole"].rsplit("/", 1)[1]
        # EC2 names an instance profile's session after the instance
        self.user_arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{controller_id}"
        self.slurm: dict[str, SlurmNode] = {}
        self.results: list[dict[str, Any]] = []
        self.commands: dict[str, dict[str, Any]] = {}  # every command received, by id
        self.silent = False
        self.jobs_end_at: datetime | None = None  # when the jobs on a drained node finish by themselves
        self.successor_gpus = GPUS  # what a new node's slurmd registers with
        self.registers = True  # whether a new node's slurmd joins at all
        self.await_error: str | None = None  # await_idle's error other than its deadline (a Slurm error)
        self._polled_at: datetime | None = None

    def verbs(self) -> list[tuple[str, str]]:
        return [(c["verb"], c["node"]) for c in self.commands.values()]

    def poll(self) -> None:
        """One round trip: the report (heartbeat, nodes, results), then the commands it answers with."""
        now = self.stack.clock.now()
        if self.silent or (now == self._polled_at and not self.results):
            return  # nothing can have changed on a still clock but the results it owes (test time)
        self._polled_at = now
        self._follow_hyperpod()
        if self.jobs_end_at is not None and now >= self.jobs_end_at:
            for node in self.slurm.values():
                node.jobs = []
        body = {
            "agentVersion": "1.0.0",
            "sentAt": iso(now),
            "nodes": [node.view(name) for name, node in self.slurm.items()],
            "results": self.results,
        }
        answer = handle_report(self.deps, CLUSTER, self.user_arn, body)
        self.results = []
        for command in answer["commands"]:
            self.commands.setdefault(command["commandId"], command)
            result = self._run(command, now)
            if result is not None:
                self.results.append({"commandId": command["commandId"], **result})

    def _follow_hyperpod(self) -> None:
        """A new worker's slurmd registers once it is Running (unless ``registers`` is off)."""
        summaries = self.stack.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER, MaxResults=100)
        for node in summaries["ClusterNodeSummaries"]:
            name = slurm_name(node["PrivateDnsHostname"])
            running = node["InstanceStatus"]["Status"] == "Running"
            if node["InstanceGroupName"] == WORKERS and running and name not in self.slurm and self.registers:
                self.slurm[name] = SlurmNode(gpus=self.successor_gpus)

    def _run(self, command: dict[str, Any], now: datetime) -> dict[str, Any] | None:
        """The agent's verbs (docs/agent.md); None while a command is held open across polls."""
        node = self.slurm.get(command["node"])
        past_deadline = iso(now) >= command["deadline"]
        if node is None:
            if command["verb"] == "resume" and not past_deadline:
                return None  # resume waits until the node is in Slurm's list
            return {"ok": False, "error": "unknown node" if command["verb"] != "resume" else "deadline"}
        name = command["node"]
        if command["verb"] == "drain":
            previous = {"state": node.state, "reason": node.reason}
            node.state, node.reason = node.state.split("+")[0] + "+DRAIN", command["reason"]
            return {"ok": True, "detail": {"node": node.view(name), "previous": previous}}
        if command["verb"] == "await_idle":
            if self.await_error:
                return {"ok": False, "error": self.await_error}
            if node.jobs:
                return {"ok": False, "error": "deadline"} if past_deadline else None
        elif command["verb"] == "requeue":
            requeued, node.jobs = node.jobs, []
            return {"ok": True, "detail": {"requeued": requeued, "notRequeued": [], "node": node.view(name)}}
        elif command["verb"] == "resume":
            node.state, node.reason = "IDLE", ""
        return {"ok": True, "detail": {"node": node.view(name)}}


# --------------------------------------------------------------------------------------------------
# the cluster, the agent, the repair
# --------------------------------------------------------------------------------------------------


def slurm_cluster(
    stack: Deployed, *, agent: bool = True, node_recovery: str = "None"
) -> tuple[str, PlayedAgent]:
    """The simulator's InService Slurm cluster, its lifecycle scripts naming the controller group
    (provisioning_parameters.json, as AWS's samples write it: the trust rule reads it), and its agent,
    which has reported once when ``agent``; a worker running a job, the node to repair."""
    s3 = stack.client("s3")
    s3.create_bucket(Bucket="sagemaker-lifecycle-123456789012")
    s3.put_object(
        Bucket="sagemaker-lifecycle-123456789012",
        Key="src/provisioning_parameters.json",
        Body=json.dumps({"version": "1.0.0", "workload_manager": "slurm", "controller_group": CONTROLLER}),
    )
    groups = make_cluster(stack, node_recovery=node_recovery)
    played = PlayedAgent(stack, groups[CONTROLLER][0])
    node = groups[WORKERS][0]
    if agent:
        played.poll()  # the workers' slurmd registered
        played.slurm[slurm_name(hostname(stack, node))] = SlurmNode(state="ALLOCATED", jobs=[JOB])
        played.poll()
    return node, played


def hostname(stack: Deployed, node_id: str) -> str:
    described = stack.client("sagemaker").describe_cluster_node(ClusterName=CLUSTER, NodeId=node_id)
    return str(described["NodeDetails"]["PrivateDnsHostname"])


def start(stack: Deployed, node_id: str, action: NodeAction, found: Fault) -> str:
    """Claim the repair and start its execution as start_repair does (gpusLost from the policy table);
    the execution ARN."""
    return start_repair(stack, node_id, action, found, gpus_lost=gpus_lost(found))


@dataclass
class SlurmRepair:
    """A stack with DrainTimeoutMinutes of ``DRAIN_MINUTES`` (and the test's parameters), its Slurm
    cluster and agent (``slurm_cluster``), and the worker to repair."""

    stack: Deployed
    node: str
    agent: PlayedAgent
    name: str  # the node's Slurm name

    def repair(
        self, action: NodeAction, fault_type: str = "NvidiaErrorReboot", **options: Any
    ) -> dict[str, Any]:
        """HMA finds ``fault_type`` on the node; the repair's execution, run to its end with the agent
        polling each round (a silent one stays silent)."""
        found = fault(self.stack, self.node, fault_type, **options)
        [execution] = run(self.stack, start(self.stack, self.node, action, found), each_round=self.agent.poll)
        return execution


def slurm_repair(
    make_stack: Any, *, agent: bool = True, node_recovery: str = "None", **parameters: Any
) -> SlurmRepair:
    stack = make_stack(clock_speed=0, **SHORT_DRAIN, **parameters)
    node, played = slurm_cluster(stack, agent=agent, node_recovery=node_recovery)
    return SlurmRepair(stack, node, played, slurm_name(hostname(stack, node)))


def actions(execution: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a.action.value, a.result.value) for a in operation_of(execution).actions or []]


# --------------------------------------------------------------------------------------------------
# the paths
# --------------------------------------------------------------------------------------------------


def test_a_connected_agent_drains_requeues_replaces_and_resumes_the_successor(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    stack, node, agent, name = setup.stack, setup.node, setup.agent, setup.name

    execution = setup.repair(NodeAction.REPLACE)  # the job never ends by itself

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [
        ("drain", "succeeded"),
        ("await-jobs", "timed-out"),  # past DrainTimeoutMinutes
        ("requeue", "succeeded"),
        ("replace", "succeeded"),
        ("resume", "succeeded"),
    ]
    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert successor is not None
    successor_name = slurm_name(hostname(stack, successor))
    assert successor_name != name  # a new instance: a new Slurm name
    assert agent.verbs() == [
        ("drain", name),
        ("await_idle", name),
        ("requeue", name),
        ("resume", successor_name),
    ]
    [drain] = [c for c in agent.commands.values() if c["verb"] == "drain"]
    assert drain["reason"] == f"autopilot {operation.operation_id}: replace (NvidiaErrorReboot)"
    assert agent.slurm[name].jobs == []  # requeued before the replace
    assert agent.slurm[successor_name].state == "IDLE"
    assert not operation.warnings
    # the order of the states: drained and requeued before HyperPod is called, resumed after it
    states = entered(history(stack, execution["executionArn"]))
    assert states.index("Requeue Jobs") < states.index("Replace Node") < states.index("Resume In Slurm")
    assert_released(stack, execution, node)


def test_jobs_that_end_within_the_drain_timeout_are_not_requeued(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    agent, name = setup.agent, setup.name
    # (HMA's report comes 5 s later: the jobs still end halfway through the drain timeout)
    agent.jobs_end_at = setup.stack.clock.now() + timedelta(minutes=DRAIN_MINUTES / 2)

    execution = setup.repair(NodeAction.REBOOT)

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [
        ("drain", "succeeded"),
        ("await-jobs", "succeeded"),
        ("reboot", "succeeded"),
        ("resume", "succeeded"),
    ]
    assert agent.verbs() == [("drain", name), ("await_idle", name), ("resume", name)]
    assert agent.slurm[name].state == "IDLE"


def test_a_fault_that_took_the_gpus_requeues_without_waiting(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    agent, name = setup.agent, setup.name

    # the policy table: an NvidiaErrorTerminate's GPUs are gone
    execution = setup.repair(NodeAction.REPLACE, "NvidiaErrorTerminate")

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [
        ("drain", "succeeded"),
        ("requeue", "succeeded"),
        ("replace", "succeeded"),
        ("resume", "succeeded"),
    ]
    assert "await_idle" not in [verb for verb, _ in agent.verbs()]
    assert ("requeue", name) in agent.verbs()


def test_requeue_jobs_on_repair_false_leaves_the_jobs_to_the_repair_with_a_warning(make_stack: Any) -> None:
    setup = slurm_repair(make_stack, RequeueJobsOnRepair="false")
    agent, name = setup.agent, setup.name

    execution = setup.repair(NodeAction.REBOOT)

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [
        ("drain", "succeeded"),
        ("await-jobs", "timed-out"),
        ("requeue", "skipped"),
        ("reboot", "succeeded"),
        ("resume", "succeeded"),
    ]
    assert "requeue" not in [verb for verb, _ in agent.verbs()]
    [skipped] = [a for a in operation_of(execution).actions or [] if a.action.value == "requeue"]
    assert skipped.message == f"RequeueJobsOnRepair is false: jobs {JOB} left on {name} end with the reboot"
    [warning] = operation_of(execution).warnings or []
    assert "RequeueJobsOnRepair is false" in warning
    assert JOB in warning
    assert name in warning


@pytest.mark.parametrize("agent_state", ["absent", "silent"])
def test_without_a_connected_agent_the_repair_is_todays_with_a_warning(
    make_stack: Any, agent_state: str
) -> None:
    setup = slurm_repair(make_stack, agent=agent_state == "silent")
    stack, node = setup.stack, setup.node
    setup.agent.silent = True  # absent: it never reported; silent: its last report is older than 60 s
    found = fault(stack, node, "NvidiaErrorReboot")
    stack.clock.advance(120)

    [execution] = run(stack, start(stack, node, NodeAction.REBOOT, found))

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [("reboot", "succeeded")]
    [warning] = operation_of(execution).warnings or []
    assert f"the Slurm agent of the cluster is {agent_state}" in warning
    assert "without a drain" in warning
    assert "Drain Node" not in entered(history(stack, execution["executionArn"]))


def test_an_eks_cluster_gets_todays_repair_with_a_warning(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, **SHORT_DRAIN)
    _, node, _ = eks_continuous_cluster(stack)
    found = fault(stack, node, "NvidiaErrorReboot")

    [execution] = run(stack, start(stack, node, NodeAction.REBOOT, found))

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [("reboot", "succeeded")]
    [warning] = operation_of(execution).warnings or []
    assert warning.startswith("not a Slurm cluster")


def test_an_agent_that_goes_silent_mid_drain_falls_back_to_todays_repair(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    stack, node, agent = setup.stack, setup.node, setup.agent
    arn = start(stack, node, NodeAction.REBOOT, fault(stack, node, "NvidiaErrorReboot"))

    def quiet_once_commanded() -> None:
        if agent.commands:
            agent.silent = True  # it took the drain and was never heard of again
        agent.poll()

    [execution] = run(stack, arn, each_round=quiet_once_commanded)

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [("drain", "timed-out"), ("reboot", "succeeded")]
    [warning] = operation_of(execution).warnings or []
    assert "was not drained (States.Timeout)" in warning
    assert "Resume In Slurm" not in entered(history(stack, arn))  # nothing waits for it again


@pytest.mark.parametrize("configured", [0, 4])
def test_the_resume_expects_the_gpu_count_slurm_showed_before_the_repair(
    make_stack: Any, configured: int
) -> None:
    """A slurm.conf with no gpu GRES (0) or fewer than the instance type has (4 of a p5's 8): the
    successor shows what the node showed, and the repair succeeds on that."""
    setup = slurm_repair(make_stack)
    agent = setup.agent
    for view in agent.slurm.values():
        view.gpus = configured
    setup.stack.clock.advance(1)
    agent.poll()  # the status call reads the node's view from the agent's last report
    agent.successor_gpus = configured

    execution = setup.repair(NodeAction.REPLACE, "NvidiaErrorTerminate")

    assert execution["status"] == "SUCCEEDED", operation_of(execution).error
    assert actions(execution)[-1] == ("resume", "succeeded")
    [resume] = [a for a in operation_of(execution).actions or [] if a.action.value == "resume"]
    assert resume.message is not None
    assert resume.message.endswith(f"with {configured} GPUs")
    [command] = [c for c in agent.commands.values() if c["verb"] == "resume"]
    stored = agent.deps.agents.command(CLUSTER, command["commandId"])
    assert stored is not None
    assert stored.expected_gpus == (configured or None)  # 0: the state alone is checked


def test_a_node_slurm_does_not_list_is_repaired_without_a_drain(make_stack: Any) -> None:
    """A login node (no slurmd): nothing to drain, requeue or resume, and no failed drain recorded."""
    setup = slurm_repair(make_stack)
    agent = setup.agent
    agent.registers = False  # no slurmd on it
    del agent.slurm[setup.name]
    setup.stack.clock.advance(1)
    agent.poll()

    execution = setup.repair(NodeAction.REBOOT)

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [("reboot", "succeeded")]
    assert agent.verbs() == []
    [warning] = operation_of(execution).warnings or []
    assert "is not in the last report of the Slurm agent" in warning
    assert "not drained" not in warning


def test_a_wait_for_the_jobs_that_fails_for_another_reason_is_failed_with_its_cause(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    setup.agent.await_error = "squeue: error: Unable to contact slurm controller (connect failure)"

    execution = setup.repair(NodeAction.REBOOT)

    assert execution["status"] == "SUCCEEDED"
    assert actions(execution) == [
        ("drain", "succeeded"),
        ("await-jobs", "failed"),
        ("requeue", "succeeded"),
        ("reboot", "succeeded"),
        ("resume", "succeeded"),
    ]
    [waited] = [a for a in operation_of(execution).actions or [] if a.action.value == "await-jobs"]
    assert waited.error_code == "Autopilot.AgentCommandFailed"
    assert waited.message is not None
    assert "Unable to contact slurm controller" in waited.message
    assert "DrainTimeoutMinutes" not in waited.message


def test_a_status_read_that_fails_once_is_retried_and_the_repair_stays_slurm_aware(make_stack: Any) -> None:
    setup = slurm_repair(make_stack)
    stack = setup.stack
    setup.agent.jobs_end_at = stack.clock.now()
    # AgentFunction's DescribeCluster throttled on every attempt of its client's retries: one status
    # invoke fails (a function error, States.TaskFailed), the next is answered
    assert stack.aws_calls is not None
    stack.aws_calls.apply_fault(
        "throttling", {"rate": 1.0, "services": ["sagemaker"], "operations": ["DescribeCluster"], "times": 6}
    )

    execution = setup.repair(NodeAction.REBOOT)

    assert execution["status"] == "SUCCEEDED"
    assert [a for a, _ in actions(execution)] == ["drain", "reboot", "resume"]
    assert not operation_of(execution).warnings
    events = history(stack, execution["executionArn"])
    failed = [e for e in events if e["type"] in ("TaskFailed", "LambdaFunctionFailed")]
    assert failed, "the status invoke failed once"


@pytest.mark.parametrize("action", [NodeAction.REBOOT, NodeAction.REPLACE])
def test_an_operators_drain_survives_a_reboot(make_stack: Any, action: NodeAction) -> None:
    setup = slurm_repair(make_stack)
    stack, agent, name = setup.stack, setup.agent, setup.name
    agent.slurm[name] = SlurmNode(state="IDLE+DRAIN", reason="bad IB link, ticket 42")
    stack.clock.advance(1)
    agent.poll()

    execution = setup.repair(action)

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    if action is NodeAction.REBOOT:
        assert actions(execution) == [("drain", "succeeded"), ("reboot", "succeeded"), ("drain", "succeeded")]
        assert [c.get("reason") for c in agent.commands.values()] == [
            f"autopilot {operation.operation_id}: reboot (NvidiaErrorReboot)",
            "bad IB link, ticket 42",
        ]
        assert (agent.slurm[name].state, agent.slurm[name].reason) == ("IDLE+DRAIN", "bad IB link, ticket 42")
        [warning] = operation.warnings or []
        assert "drained by an operator before the repair (bad IB link, ticket 42)" in warning
    else:  # the successor is a new node: nobody drained it
        assert actions(execution) == [
            ("drain", "succeeded"),
            ("replace", "succeeded"),
            ("resume", "succeeded"),
        ]
        assert operation.successor_node_id is not None
        assert agent.verbs()[-1] == ("resume", slurm_name(hostname(stack, operation.successor_node_id)))
        assert not operation.warnings


@pytest.mark.parametrize("registers", [True, False])
def test_hyperpods_own_repair_is_done_when_the_successor_is_back_in_slurm(
    make_stack: Any, registers: bool
) -> None:
    """observe: HyperPod replaces the node itself (NodeRecovery Automatic); Autopilot drains nothing,
    and the repair is SUCCEEDED only once the successor is back in Slurm."""
    setup = slurm_repair(make_stack, node_recovery="Automatic")
    agent = setup.agent
    agent.registers = registers

    execution = setup.repair(NodeAction.OBSERVE, "NvidiaErrorTerminate", auto_recover=True)

    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert successor is not None
    successor_name = slurm_name(hostname(setup.stack, successor))
    assert agent.verbs() == [("resume", successor_name)]  # no drain, no requeue: HyperPod's repair
    assert actions(execution)[0] == ("observe", "succeeded")
    if registers:
        assert execution["status"] == "SUCCEEDED"
        assert actions(execution) == [("observe", "succeeded"), ("resume", "succeeded")]
        assert agent.slurm[successor_name].state == "IDLE"
    else:
        assert execution["status"] == "FAILED"
        assert actions(execution)[-1][0] == "resume"
        assert operation.error is not None
        assert operation.error.error == "Autopilot.NodeNotBackInSlurm"
    assert not operation.warnings


@pytest.mark.parametrize("back", ["wrong-gpu-count", "never-registers"])
def test_a_node_that_does_not_come_back_into_slurm_fails_the_repair(make_stack: Any, back: str) -> None:
    setup = slurm_repair(make_stack)
    stack, agent = setup.stack, setup.agent
    if back == "wrong-gpu-count":
        agent.successor_gpus = 4  # GRES came back wrong
    else:
        agent.registers = False  # slurmd of the new instance never joins

    execution = setup.repair(NodeAction.REPLACE, "NvidiaErrorTerminate")

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.status is OperationStatus.FAILED
    replaced, resumed = actions(execution)[-2:]
    assert replaced == ("replace", "succeeded")
    # the agent gives up at the command's deadline, the moment the task times out: either comes first
    assert resumed in {("resume", "failed"), ("resume", "timed-out")}
    assert operation.error is not None
    assert operation.error.error == "Autopilot.NodeNotBackInSlurm"
    successor = operation.successor_node_id
    assert successor is not None
    assert slurm_name(hostname(stack, successor)) in operation.error.cause
    if back == "wrong-gpu-count":
        assert "4 GPUs in Slurm, 8 expected" in operation.error.cause
    else:
        assert "deadline" in operation.error.cause or "no result within 30 minutes" in operation.error.cause
    assert_released(stack, execution, setup.node)
    [event] = [e for e in stack.operation_events() if e["detail"].get("operationType") == "ReplaceNode"]
    assert event["detail-type"] == "Node Repair Failed"
