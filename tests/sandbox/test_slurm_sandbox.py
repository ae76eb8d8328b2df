"""``Sandbox(slurm=True)``: the admin route names each Slurm cluster's slurm.conf and nodes, and the agent
the sandbox starts reports through the local API with the controller role's credentials, accepted by
AgentFunction (the agent's status turns connected). One sandbox on a frozen clock serves the module."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.emulator.clock import SandboxClock
from sandbox.harness.core import Sandbox
from sandbox.services.slurm.agent import agent_files, create_agent_role
from sandbox.services.slurm.processes import processes_using
from tests.samples import api_event
from tests.sandbox.conftest import build_hyperpod_cluster_request

# slow tier: real Slurm daemons (an external tool, tests/README.md), their timeouts on wall time
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("slurm_required")]

BUCKET = "lifecycle-scripts"
ROLE = "HyperPodExecutionRole"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    # the sample API events' caller an admin: GET /clusters/{name} of a cluster Autopilot did not create
    admin = {"AdminPrincipalArns": "arn:aws:iam::123456789012:role/ResearcherRole"}
    with Sandbox(clock=SandboxClock(speed=0), slurm=True, schedules=False, parameters=admin) as sb:
        yield sb


@pytest.fixture(scope="module")
def aws_url(sandbox: Sandbox) -> str:
    return sandbox.serve_aws(0)


def admin(aws_url: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"{aws_url}/_sandbox/{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def create_cluster(sandbox: Sandbox, name: str, *, with_agent: bool, config_missing: bool = False) -> None:
    """A Slurm cluster whose lifecycle scripts (and so, maybe, the agent's installer) are in S3."""
    s3 = sandbox.client("s3")
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    prefix = f"{name}/scripts"
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/on_create.sh", Body=b"#!/bin/bash\n")
    if with_agent:  # the agent as an operator ships it; config.json without clusterName (the node has it)
        config = {
            "apiUrl": "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/Prod",
            "region": sandbox.region,
        }
        for key, body in agent_files(None if config_missing else config).items():
            s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{key}", Body=body)
    request = build_hyperpod_cluster_request(name, workers=2)
    for group in request["InstanceGroups"]:
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{BUCKET}/{prefix}"
        group["ExecutionRole"] = f"arn:aws:iam::{sandbox.account_id}:role/{ROLE}"
    sandbox.client("sagemaker").create_cluster(**request)
    sandbox.advance(sandbox.hyperpod.timings.create_cluster + 1)
    assert sandbox.slurm.settle(60)


def test_the_admin_route_names_the_slurm_conf_and_each_workers_slurm_name(
    sandbox: Sandbox, aws_url: str
) -> None:
    create_cluster(sandbox, "lab", with_agent=False)
    status, view = admin(aws_url, "slurm/lab")
    assert status == 200
    nodes = sandbox.client("sagemaker").list_cluster_nodes(ClusterName="lab")["ClusterNodeSummaries"]
    workers = {
        n["InstanceId"]: n["PrivateDnsHostname"].split(".")[0]
        for n in nodes
        if "worker" in n["InstanceGroupName"]
    }
    assert view["nodes"] == workers
    slurm = sandbox.slurm.cluster("lab").slurm
    assert view["slurmConf"] == str(slurm.conf)
    slurm.wait_for(
        "the workers in sinfo",
        lambda: set(slurm.run("sinfo", "-h", "-N", "-o", "%N").split()) == set(workers.values()),
    )
    assert admin(aws_url, "slurm/no-such-cluster")[0] == 404


def test_the_agent_reports_as_the_controller_role_and_is_connected(sandbox: Sandbox) -> None:
    create_agent_role(sandbox.client("iam"), ROLE)
    create_cluster(sandbox, "with-agent", with_agent=True)
    agent = sandbox.slurm.cluster("with-agent").agent
    assert agent is not None
    deadline = time.monotonic() + 30
    while True:
        status = sandbox.invoke("AgentFunction", {"status": {"clusterName": "with-agent"}}).json()
        if status["status"] == "connected" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    slurm = sandbox.slurm.cluster("with-agent")
    log = slurm.node_root(slurm.agent_instance) / "agent.log"  # journald's, on a node
    assert status["status"] == "connected", log.read_text()
    assert set(status["nodes"]) == set(admin_nodes(sandbox, "with-agent"))  # Slurm's own view of the workers
    assert {view["gpus"] for view in status["nodes"].values()} == {8}  # ml.p5.48xlarge, as Slurm counts


def admin_nodes(sandbox: Sandbox, name: str) -> list[str]:
    view = sandbox.slurm.view(name)
    assert view is not None
    return list(view["nodes"].values())


def test_a_config_json_missing_in_s3_leaves_the_cluster_without_an_agent(sandbox: Sandbox) -> None:
    # install.sh refuses to install without config.json, as on a node: no agent, the reason in the
    # node's lifecycle log, and the API and the repair workflow see the agent absent
    create_cluster(sandbox, "no-config", with_agent=True, config_missing=True)
    slurm = sandbox.slurm.cluster("no-config")
    assert slurm.agent is None
    nodes = sandbox.client("sagemaker").list_cluster_nodes(ClusterName="no-config")["ClusterNodeSummaries"]
    (controller,) = [n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller-machine"]
    assert "config.json is missing" in (slurm.node_root(controller) / "lifecycle.log").read_text()
    answer = sandbox.invoke("ApiFunction", api_event("get_cluster", path_parameters={"name": "no-config"}))
    response = answer.json()
    assert response["statusCode"] == 200, response
    assert json.loads(response["body"])["agent"]["status"] == "absent"
    # what Check Agent reads: absent → today's repair with a warning (tests/integration/
    # test_asl_replace_node_slurm.py, test_without_a_connected_agent_the_repair_is_todays_with_a_warning)
    status = sandbox.invoke("AgentFunction", {"status": {"clusterName": "no-config"}}).json()
    assert status["status"] == "absent"


def test_stopping_the_sandbox_leaves_no_slurm_daemon_or_agent(sandbox: Sandbox) -> None:
    workdir = sandbox.slurm.workdir  # every cluster's daemons and agent live under it
    agent = sandbox.slurm.cluster("with-agent").agent
    assert processes_using(str(workdir))
    sandbox.stop()  # the module's last test: the fixture's own stop() is then a no-op
    assert not processes_using(str(workdir))
    assert agent.poll() is not None
    assert not workdir.exists()
