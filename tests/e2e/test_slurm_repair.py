"""The Slurm-aware repair against real Slurm and the real agent (issue 21 Deliver 3): a job on both
workers of a sandbox Slurm cluster whose controller runs the agent; a worker's GPU fails; the repair
drains it, waits DrainTimeoutMinutes for the job, requeues it, replaces the node and resumes the
successor in Slurm.

Slow: slurmctld, one slurmd per worker and the agent are subprocesses (tests/integration plays the
agent through AgentFunction's report path for the workflow's every branch). The sandbox clock is
frozen and moved 20 s a round: the agent polls every half second of wall time, so it stays connected
(a report within 60 s of the product clock) while simulated minutes pass.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from autopilot.dal.healing import HealingTable
from autopilot.dal.state_table import StateTable
from autopilot.logic.healing.decide import gpus_lost
from autopilot.models.records import (
    Fault,
    NodeAction,
    Operation,
    OperationStatus,
    OperationType,
    RepairTrigger,
    new_operation_id,
)
from autopilot.workflows.inputs import RepairDeadlines, ReplaceNodeWorkflowInput

from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from sandbox.services.slurm.agent import agent_files, create_agent_role
from tests.sandbox.conftest import build_hyperpod_cluster_request, slurm_required  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("slurm_required")
CLUSTER = "slurm-repair"
WORKERS = "worker-group-1"
BUCKET = "lifecycle-scripts"
ROLE = "HyperPodExecutionRole"
DRAIN_MINUTES = 3
STEP = 20.0  # simulated seconds a round
DEADLINE_S = 240.0


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    parameters = {"DrainTimeoutMinutes": DRAIN_MINUTES}
    with Sandbox(clock=SandboxClock(speed=0), slurm=True, schedules=False, parameters=parameters) as running:
        yield running


def agent_cluster(sandbox: Sandbox) -> None:
    """A Slurm cluster whose lifecycle scripts install the agent, whose execution role may report."""
    create_agent_role(sandbox.client("iam"), ROLE, CLUSTER)
    s3 = sandbox.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    # the agent as an operator ships it (the sandbox runs its install.sh on the controller, as a node would)
    config = {
        "apiUrl": "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/Prod",
        "region": sandbox.region,
    }
    for key, body in {"on_create.sh": b"#!/bin/bash\n", **agent_files(config)}.items():
        s3.put_object(Bucket=BUCKET, Key=f"{CLUSTER}/{key}", Body=body)
    request = build_hyperpod_cluster_request(CLUSTER, workers=2)
    for group in request["InstanceGroups"]:
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{BUCKET}/{CLUSTER}"
        group["ExecutionRole"] = f"arn:aws:iam::{sandbox.account_id}:role/{ROLE}"
    sandbox.client("sagemaker").create_cluster(**request)
    sandbox.advance(sandbox.hyperpod.timings.create_cluster + 1)
    assert sandbox.slurm.settle(60)
    deadline = time.monotonic() + 60
    while (
        sandbox.invoke("AgentFunction", {"status": {"clusterName": CLUSTER}}).json()["status"] != "connected"
    ):
        assert time.monotonic() < deadline, "the agent never reported"
        time.sleep(0.2)


def start_repair(sandbox: Sandbox, node_id: str, found: Fault) -> tuple[str, str]:
    """Claim and start the repair as autopilot.logic.healing.start_repair does; (operation id, ARN)."""
    now = sandbox.clock.now()
    operation = Operation(
        operation_id=new_operation_id(now),
        operation_type=OperationType.REPLACE_NODE,
        cluster_name=CLUSTER,
        status=OperationStatus.RUNNING,
        created_at=now,
        updated_at=now,
        node_id=node_id,
        trigger=RepairTrigger.EVENT,
        fault=found,
        actions=[],
    )
    healing = HealingTable(sandbox.stack.physical_id("StateTable"), dynamodb=sandbox.client("dynamodb"))
    assert healing.claim_repair(operation, fault_at=found.detected_at)
    workflow_input = ReplaceNodeWorkflowInput(
        operation_id=operation.operation_id,
        cluster_name=CLUSTER,
        node_id=node_id,
        action=NodeAction.REPLACE,
        trigger=RepairTrigger.EVENT,
        fault=found,
        deadlines=RepairDeadlines(reboot_seconds=1800, replace_seconds=3600, hyperpod_seconds=2400),
        gpus_lost=gpus_lost(found),
    )
    arn = sandbox.client("stepfunctions").start_execution(
        stateMachineArn=sandbox.stack.arn("ReplaceNodeStateMachine"),
        name=operation.operation_id,
        input=workflow_input.model_dump_json(by_alias=True),
    )["executionArn"]
    healing.set_execution_arn(operation.operation_id, arn)
    return operation.operation_id, str(arn)


def slurm_name(sandbox: Sandbox, node_id: str) -> str:
    described = sandbox.client("sagemaker").describe_cluster_node(ClusterName=CLUSTER, NodeId=node_id)
    return str(described["NodeDetails"]["PrivateDnsHostname"]).split(".", 1)[0]


def test_a_job_survives_the_repair_of_its_node(sandbox: Sandbox) -> None:
    agent_cluster(sandbox)
    slurm = sandbox.slurm.cluster(CLUSTER).slurm
    slurm.run("sbatch", "-N2", "--requeue", "-o", "/dev/null", "--wrap", "sleep 100000")
    slurm.wait_for("the job running", lambda: slurm.run("squeue", "-h", "-o", "%t").split() == ["R"])
    nodes = sandbox.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
    worker, other = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == WORKERS]
    name = slurm_name(sandbox, worker)
    reported = sandbox.hyperpod.fault_node_unhealthy(CLUSTER, worker, "NvidiaErrorReboot", auto_recover=False)
    found = Fault(
        fault_type="NvidiaErrorReboot",
        reason=reported["HealthStatusReason"],
        detected_at=sandbox.clock.now(),
    )
    operation_id, arn = start_repair(sandbox, worker, found)

    sfn = sandbox.client("stepfunctions")
    deadline = time.monotonic() + DEADLINE_S
    while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the repair did not end"
        sandbox.advance(STEP)
        time.sleep(0.5)

    store = StateTable(sandbox.stack.physical_id("StateTable"), sandbox.client("dynamodb"))
    operation = store.get_operation(operation_id)
    assert operation is not None
    assert operation.status is OperationStatus.SUCCEEDED, operation.error
    actions = operation.actions or []
    assert [(a.action.value, a.result.value) for a in actions] == [
        ("drain", "succeeded"),
        ("await-jobs", "timed-out"),  # sleep 100000 outlasts DrainTimeoutMinutes
        ("requeue", "succeeded"),
        ("replace", "succeeded"),
        ("resume", "succeeded"),
    ]
    assert (actions[0].message or "").startswith(f"Slurm node {name} drained")
    successor = operation.successor_node_id
    assert successor is not None
    states = dict(line.split(":") for line in slurm.run("sinfo", "-h", "-N", "-o", "%N:%T").split())
    # the successor joined under its own name and takes jobs; the other worker was never touched
    assert states[slurm_name(sandbox, successor)] in {"idle", "allocated", "mixed"}
    assert states[slurm_name(sandbox, other)] in {"idle", "allocated", "mixed"}
    # the job went back to the queue (requeued, not killed): pending until Slurm's begin time, or running
    assert slurm.run("squeue", "-h", "-o", "%i:%t").split() in (["1:PD"], ["1:R"], ["1:CF"])
