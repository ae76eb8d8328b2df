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

from sandbox.clock import SandboxClock
from sandbox.core import Sandbox
from sandbox.slurm.cluster import _processes_using
from tests.sandbox.conftest import build_hyperpod_cluster_request

pytestmark = pytest.mark.usefixtures("slurm_required")

BUCKET = "lifecycle-scripts"
ROLE = "HyperPodExecutionRole"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(clock=SandboxClock(speed=0), slurm=True, schedules=False) as sb:
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


def create_cluster(sandbox: Sandbox, name: str, *, with_agent: bool) -> None:
    """A Slurm cluster whose lifecycle scripts (and so, maybe, the agent's installer) are in S3."""
    s3 = sandbox.client("s3")
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    prefix = f"{name}/scripts"
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/on_create.sh", Body=b"#!/bin/bash\n")
    if with_agent:
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/autopilot-agent/install.sh", Body=b"#!/bin/bash\n")
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
    iam = sandbox.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(trust))
    invoke = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": "arn:aws:execute-api:*:*:*/*/POST/agent/*/reports",
    }
    iam.put_role_policy(
        RoleName=ROLE,
        PolicyName="agent",
        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [invoke]}),
    )
    create_cluster(sandbox, "with-agent", with_agent=True)
    agent = sandbox.slurm.cluster("with-agent").agent
    assert agent is not None
    deadline = time.monotonic() + 30
    while True:
        status = sandbox.invoke("AgentFunction", {"status": {"clusterName": "with-agent"}}).json()
        if status["status"] == "connected" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    log = sandbox.slurm.cluster("with-agent").slurm.workdir / "agent.log"
    assert status["status"] == "connected", log.read_text()
    assert set(status["nodes"]) == set(admin_nodes(sandbox, "with-agent"))  # Slurm's own view of the workers
    assert {view["gpus"] for view in status["nodes"].values()} == {8}  # ml.p5.48xlarge, as Slurm counts


def admin_nodes(sandbox: Sandbox, name: str) -> list[str]:
    view = sandbox.slurm.view(name)
    assert view is not None
    return list(view["nodes"].values())


def test_stopping_the_sandbox_leaves_no_slurm_daemon_or_agent(sandbox: Sandbox) -> None:
    workdir = sandbox.slurm.workdir  # every cluster's daemons and agent live under it
    agent = sandbox.slurm.cluster("with-agent").agent
    assert _processes_using(str(workdir))
    sandbox.stop()  # the module's last test: the fixture's own stop() is then a no-op
    assert not _processes_using(str(workdir))
    assert agent.poll() is not None
    assert not workdir.exists()
