"""Issue 21's "Done when", as in `sandbox up` with real Slurm: the API served, the HTTP client, the
clock running (x1200), operators' steps as docs/agent.md gives them.

- A cluster whose lifecycle prefix holds the agent: a job on both workers, a GPU fault on one → drain →
  requeue → replace → resume; every node idle or allocated in sinfo, the job running again, each step
  in the operation's actions.
- The same cluster shape without the agent: today's repair, with a warning.
- A report for the first cluster signed by the second cluster's controller role, or by an IAM user,
  both allowed execute-api:Invoke on its route: 403, nothing stored.

Slow: slurmctld, a slurmd per worker and the agent are subprocesses (tests/sandbox/test_slurm_*.py hold
the pieces; tests/e2e/test_slurm_repair.py the workflow on a frozen clock).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
import requests
from autopilot.dal.agent import AgentTable
from autopilot_cli.client import AutopilotClient
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.apps.demo.clusters import create_body
from sandbox.harness.core import Sandbox
from tests.e2e.conftest import E2E_PARAMETERS, E2E_SPEED
from tests.sandbox.conftest import slurm_required  # noqa: F401 - fixture

pytestmark = [
    pytest.mark.usefixtures("slurm_required"),
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]
WORKERS = "worker-group-1"
FAULT = "NvidiaErrorTerminate"  # the GPU is gone: a replace, no wait for the jobs
AGENT_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "agent")
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
TIMEOUT_S = 90.0


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """`sandbox up`'s: real Slurm, the agent where a cluster installs it (overrides conftest's)."""
    with Sandbox(parameters=E2E_PARAMETERS, speed=E2E_SPEED, slurm=True) as running:
        yield running


def wait(what: str, probe: Any, timeout: float = TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return found


def route_arn(sandbox: Sandbox, api_url: str, cluster: str) -> str:
    """The agent's route as docs/agent.md writes it; the API id is the first label of ApiUrl's host."""
    api_id = str(urlparse(str(sandbox.stack.outputs["ApiUrl"])).hostname).split(".", 1)[0]
    return (
        f"arn:aws:execute-api:{sandbox.region}:{sandbox.account_id}:{api_id}/*/POST/agent/{cluster}/reports"
    )


def invoke(resource: str) -> str:
    statement = {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": resource}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def create_cluster(sandbox: Sandbox, api: AutopilotClient, api_url: str, name: str, *, agent: bool) -> str:
    """The operator's steps: a role with the agent's statement, the lifecycle prefix (with the agent or
    not), POST /clusters: the controller and two workers. Returns the execution role's ARN."""
    iam, s3 = sandbox.client("iam"), sandbox.client("s3")
    role = f"{name}-hyperpod-role"
    role_arn = str(iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"])
    iam.put_role_policy(
        RoleName=role, PolicyName="agent", PolicyDocument=invoke(route_arn(sandbox, api_url, name))
    )
    body = create_body(name, sandbox.region, budget=False)
    login = body["provisioningParameters"].pop("login_group")
    groups = [g for g in body["clusterConfig"]["InstanceGroups"] if g["InstanceGroupName"] != login]
    body["clusterConfig"]["InstanceGroups"] = groups
    bucket = f"{name}-lifecycle"
    s3.create_bucket(Bucket=bucket)
    files = {
        "on_create.sh": b"#!/bin/bash\n",
        "provisioning_parameters.json": json.dumps(body["provisioningParameters"]).encode(),
    }
    if agent:
        files["autopilot-agent/config.json"] = json.dumps(
            {"apiUrl": api_url, "region": sandbox.region}
        ).encode()
        for root, _, names in os.walk(AGENT_DIR):
            for file in names:
                path = os.path.join(root, file)
                if "__pycache__" not in path:
                    with open(path, "rb") as content:
                        files[f"autopilot-agent/{os.path.relpath(path, AGENT_DIR)}"] = content.read()
    for key, content in files.items():
        s3.put_object(Bucket=bucket, Key=f"src/{key}", Body=content)
    for group in groups:
        group["LifeCycleConfig"]["SourceS3Uri"] = f"s3://{bucket}/src/"
        group["ExecutionRole"] = role_arn
        if group["InstanceGroupName"] == WORKERS:
            group["InstanceCount"] = 2
            group.pop("OnStartDeepHealthChecks", None)
    operation = api.create_cluster(body)
    done = api.wait_for_operation(operation["operationId"], timeout_seconds=TIMEOUT_S, poll_seconds=0.2)
    assert done["status"] == "SUCCEEDED", done.get("error")
    return role_arn


def slurm(sandbox: Sandbox, cluster: str, *argv: str) -> str:
    status, view = sandbox.admin("GET", f"/_sandbox/slurm/{cluster}", None)
    assert status == 200, view
    env = {**os.environ, "SLURM_CONF": view["slurmConf"]}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=True).stdout


def slurm_names(sandbox: Sandbox, cluster: str) -> dict[str, str]:
    """Slurm node name by instance id (the admin route)."""
    status, view = sandbox.admin("GET", f"/_sandbox/slurm/{cluster}", None)
    assert status == 200, view
    return dict(view["nodes"])


def sinfo(sandbox: Sandbox, cluster: str) -> dict[str, str]:
    return dict(
        line.split("|") for line in slurm(sandbox, cluster, "sinfo", "-h", "-N", "-o", "%N|%T").split()
    )


def job(sandbox: Sandbox, cluster: str, job_id: str) -> list[str]:
    """[state, nodes, reason] of the job in squeue."""
    for line in slurm(sandbox, cluster, "squeue", "-h", "-o", "%i|%T|%N|%r").splitlines():
        if line.split("|")[0] == job_id:
            return line.split("|")[1:]
    return []


def repair(sandbox: Sandbox, api: AutopilotClient, cluster: str, node_id: str) -> dict[str, Any]:
    """HMA's GPU fault on the node; Autopilot's repair, followed through the API to its end."""
    sandbox.apply_fault("node_unhealthy", {"cluster": cluster, "node_id": node_id, "fault_type": FAULT})
    found = wait(
        "the repair",
        lambda: [o for o in api.list_operations(cluster, kind="ReplaceNode") if o.get("nodeId") == node_id],
    )
    return api.wait_for_operation(found[0]["operationId"], timeout_seconds=TIMEOUT_S, poll_seconds=0.2)


def signed_report(
    sandbox: Sandbox, api_url: str, cluster: str, credentials: Credentials
) -> requests.Response:
    """A report that, believed, would say the cluster's nodes are down and a drain failed."""
    body = {
        "agentVersion": "6.6.6",
        "sentAt": "2026-11-27T21:00:00.000Z",
        "nodes": [{"name": "ip-10-9-9-9", "state": "DOWN", "reason": "forged", "gpus": 0, "jobs": []}],
        "results": [{"commandId": "c-forged", "ok": False, "error": "forged", "detail": {}}],
    }
    request = AWSRequest(
        method="POST",
        url=f"{api_url}/agent/{cluster}/reports",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    SigV4Auth(credentials, "execute-api", sandbox.region).add_auth(request)
    prepared = request.prepare()
    return requests.post(prepared.url, data=prepared.body, headers=dict(prepared.headers), timeout=30)


def test_a_job_survives_the_repair_of_its_node(sandbox: Sandbox, api: AutopilotClient, api_url: str) -> None:
    create_cluster(sandbox, api, api_url, "slurm-agent", agent=True)
    assert wait("the agent", lambda: api.get_cluster("slurm-agent")["agent"]["status"] == "connected")
    submitted = slurm(
        sandbox, "slurm-agent", "sbatch", "-N2", "--requeue", "-o", "/dev/null", "--wrap", "sleep 100000"
    )
    job_id = submitted.split()[-1]
    wait("the job running", lambda: job(sandbox, "slurm-agent", job_id)[:1] == ["RUNNING"])
    # GET /clusters/{name}/nodes: the agent's view of each worker, from its next report
    node = wait(
        "the job in the agent's report",
        lambda: next(
            (
                n
                for n in api.list_nodes("slurm-agent")
                if n["InstanceGroupName"] == WORKERS and (n["slurm"] or {}).get("jobs") == [job_id]
            ),
            None,
        ),
    )
    name = slurm_names(sandbox, "slurm-agent")[node["InstanceId"]]

    done = repair(sandbox, api, "slurm-agent", node["InstanceId"])

    assert done["status"] == "SUCCEEDED", done.get("error")
    assert [(a["action"], a["result"]) for a in done["actions"]] == [
        ("drain", "succeeded"),
        ("requeue", "succeeded"),
        ("replace", "succeeded"),
        ("resume", "succeeded"),
    ]
    assert f"requeued: {job_id}" in done["actions"][1]["message"]
    assert not done.get("warnings")
    states = sinfo(sandbox, "slurm-agent")
    assert name not in states
    assert len(states) == 2
    assert set(states.values()) <= {"idle", "allocated", "mixed"}, states
    successor = next(n for n in api.list_nodes("slurm-agent") if n["InstanceId"] == done["successorNodeId"])
    assert successor["slurm"]["gpus"] == 8
    # Slurm holds a requeued batch job about two minutes (its begin time): let it go now
    assert job(sandbox, "slurm-agent", job_id) == ["PENDING", "", "BeginTime"]
    slurm(sandbox, "slurm-agent", "scontrol", "update", f"JobId={job_id}", "StartTime=now")
    running = wait(
        "the job running again", lambda: (j := job(sandbox, "slurm-agent", job_id))[:1] == ["RUNNING"] and j
    )
    nodes = slurm(sandbox, "slurm-agent", "scontrol", "show", "hostnames", running[1]).split()
    assert slurm_names(sandbox, "slurm-agent")[successor["InstanceId"]] in nodes
    assert len(nodes) == 2


def test_without_the_agent_the_repair_is_todays_with_a_warning(
    sandbox: Sandbox, api: AutopilotClient, api_url: str
) -> None:
    create_cluster(sandbox, api, api_url, "slurm-plain", agent=False)
    assert api.get_cluster("slurm-plain")["agent"]["status"] == "absent"
    node = next(n for n in api.list_nodes("slurm-plain") if n["InstanceGroupName"] == WORKERS)

    done = repair(sandbox, api, "slurm-plain", node["InstanceId"])

    assert done["status"] == "SUCCEEDED", done.get("error")
    assert [(a["action"], a["result"]) for a in done["actions"]] == [("replace", "succeeded")]
    assert any("agent" in w for w in done["warnings"]), done.get("warnings")


def test_a_forged_report_is_refused(sandbox: Sandbox, api_url: str) -> None:
    """Run after the two above: both clusters and their roles exist."""
    iam, sagemaker = sandbox.client("iam"), sandbox.client("sagemaker")
    route = route_arn(sandbox, api_url, "slurm-agent")
    # the agent-less cluster's controller role, wrongly allowed the other cluster's route too
    iam.put_role_policy(
        RoleName="slurm-plain-hyperpod-role", PolicyName="too-much", PolicyDocument=invoke(route)
    )
    controller = next(
        n["InstanceId"]
        for n in sagemaker.list_cluster_nodes(ClusterName="slurm-plain")["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == "controller-machine"
    )
    assumed = sandbox.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{sandbox.account_id}:role/slurm-plain-hyperpod-role",
        RoleSessionName=controller,
    )["Credentials"]
    iam.create_user(UserName="mallory")
    iam.put_user_policy(UserName="mallory", PolicyName="agent", PolicyDocument=invoke(route))
    key = iam.create_access_key(UserName="mallory")["AccessKey"]
    agents = AgentTable(sandbox.stack.physical_id("StateTable"), dynamodb=sandbox.client("dynamodb"))

    for forger in (
        Credentials(assumed["AccessKeyId"], assumed["SecretAccessKey"], assumed["SessionToken"]),
        Credentials(key["AccessKeyId"], key["SecretAccessKey"]),
    ):
        refused = signed_report(sandbox, api_url, "slurm-agent", forger)
        assert refused.status_code == 403, refused.text
        assert refused.json() == {"message": "not allowed to report for cluster 'slurm-agent'"}
    stored = agents.agent("slurm-agent")
    assert stored is not None
    assert stored.agent_version != "6.6.6"
    assert "ip-10-9-9-9" not in stored.nodes
