"""GET /clusters/{name} shows the Slurm agent's status and GET /clusters/{name}/nodes each node's Slurm
view from the agent's latest report (matched by the first label of PrivateDnsHostname), on the
template deployed into moto with the HyperPod simulator."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

from datetime import timedelta

from autopilot import clock
from autopilot.dal.agent import AgentTable
from autopilot.models.agent import AgentRecord, SlurmNode
from autopilot.models.records import iso

from sandbox.harness.stack import Deployed
from tests.samples import api_event
from tests.unit.api_stack import call, stack
from tests.unit.test_api_healing import active_cluster


def agents(stack: Deployed) -> AgentTable:
    return AgentTable(stack.stack.physical_id("StateTable"), dynamodb=stack.client("dynamodb"))


def test_a_cluster_shows_its_agent_absent_connected_then_silent(stack: Deployed) -> None:
    active_cluster(stack)

    def agent() -> dict[str, object]:
        status, cluster = call(api_event("get_cluster", path_parameters={"name": "ml-cluster"}))
        assert status == 200
        return dict(cluster["agent"])

    assert agent() == {"status": "absent", "lastSeen": None, "version": None}
    seen = iso(clock.now())
    agents(stack).record_report("ml-cluster", AgentRecord(last_seen=seen, agent_version="1.0.0"))
    assert agent() == {"status": "connected", "lastSeen": seen, "version": "1.0.0"}
    # AgentPollSeconds 10 (the template's default): silent after max(60, 3 x 10) seconds
    earlier = iso(clock.now() - timedelta(seconds=61))
    agents(stack).record_report("ml-cluster", AgentRecord(last_seen=earlier, agent_version="1.0.0"))
    assert agent()["status"] == "silent"


def test_nodes_show_slurms_view_by_their_hostname(stack: Deployed) -> None:
    groups = active_cluster(stack)
    summaries = stack.client("sagemaker").list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    worker = next(n for n in summaries if n["InstanceId"] == groups["worker-group-1"][0])
    slurm_name = worker["PrivateDnsHostname"].split(".")[0]
    assert slurm_name.startswith("ip-")
    drained = SlurmNode(
        name=slurm_name, state="MIXED+DRAIN", reason="autopilot op-1: replace", gpus=8, jobs=["7"]
    )
    stranger = SlurmNode(name="ip-192-0-2-1", state="IDLE")  # a Slurm node SageMaker does not list
    agents(stack).record_report(
        "ml-cluster",
        AgentRecord(
            last_seen=clock.now() - timedelta(hours=1),  # an old report still shows what it saw
            agent_version="1.0.0",
            nodes={n.name: n for n in (drained, stranger)},
        ),
    )

    status, listed = call(api_event("list_cluster_nodes", path_parameters={"name": "ml-cluster"}))

    assert status == 200
    slurm = {n["InstanceId"]: n["slurm"] for n in listed["nodes"]}
    assert slurm.pop(worker["InstanceId"]) == {
        "state": "MIXED+DRAIN",
        "reason": "autopilot op-1: replace",
        "jobs": ["7"],
        "gpus": 8,
    }
    assert set(slurm.values()) == {None}  # no report names the others
