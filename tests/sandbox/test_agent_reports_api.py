"""A Slurm agent's report through the SigV4-signed local API, as on a controller node: signed with STS
credentials of the controller group's ExecutionRole (session named after the controller's instance,
as EC2 names an instance profile's sessions), it is accepted and stored; signed by another cluster's
controller role or by an IAM user — both allowed execute-api:Invoke on the route, so API Gateway lets
them through — AgentFunction refuses it with 403 and stores nothing (issue 21 item 2)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from autopilot.dal.agent import AgentTable
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.harness.core import Sandbox
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
SAGEMAKER_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}
REPORT = {
    "agentVersion": "1.0.0",
    "sentAt": "2026-11-27T21:00:00.000Z",
    "nodes": [{"name": "ip-10-1-2-3", "state": "IDLE", "reason": "", "gpus": 8, "jobs": []}],
    "results": [],
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=DEMO_PARAMETERS, speed=0, schedules=False) as running:
        yield running


@pytest.fixture(scope="module")
def api_url(sandbox: Sandbox) -> str:
    return sandbox.serve_api(0)


def invoke_policy(route: str) -> str:
    statement = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": f"arn:aws:execute-api:*:*:*/*/{route}",
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def slurm_cluster(sandbox: Sandbox, name: str, *, controller_route: str) -> tuple[str, str]:
    """A Slurm cluster in SageMaker whose controller group has a role of its own (allowed
    ``controller_route``): the role's ARN and the controller's instance id."""
    iam = sandbox.client("iam")
    role = f"{name}-hyperpod-controller"
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))["Role"]["Arn"]
    iam.put_role_policy(RoleName=role, PolicyName="agent", PolicyDocument=invoke_policy(controller_route))
    config = {k: v for k, v in create_body(name)["clusterConfig"].items() if k != "Tags"}
    controller = next(g for g in config["InstanceGroups"] if g["InstanceGroupName"] == "controller-machine")
    controller["ExecutionRole"] = arn
    # the workshops' layout: no SlurmConfig, the controller group named by provisioning_parameters.json
    bucket, _, prefix = controller["LifeCycleConfig"]["SourceS3Uri"].removeprefix("s3://").partition("/")
    s3 = sandbox.client("s3")
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=bucket)
    parameters = {"version": "1.0.0", "workload_manager": "slurm", "controller_group": "controller-machine"}
    s3.put_object(
        Bucket=bucket,
        Key=f"{prefix.rstrip('/')}/provisioning_parameters.json".lstrip("/"),
        Body=json.dumps(parameters).encode(),
    )
    sagemaker = sandbox.client("sagemaker")
    sagemaker.create_cluster(**config)
    deadline = time.monotonic() + 60
    while sagemaker.describe_cluster(ClusterName=name)["ClusterStatus"] != "InService":
        assert time.monotonic() < deadline
        sandbox.advance(600)
        time.sleep(0.02)
    nodes = sagemaker.list_cluster_nodes(ClusterName=name)["ClusterNodeSummaries"]
    return arn, next(n["InstanceId"] for n in nodes if n["InstanceGroupName"] == "controller-machine")


def as_session(sandbox: Sandbox, role_arn: str, session: str) -> Credentials:
    creds = sandbox.client("sts").assume_role(RoleArn=role_arn, RoleSessionName=session)["Credentials"]
    return Credentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])


def report(sandbox: Sandbox, api_url: str, cluster: str, credentials: Credentials) -> requests.Response:
    request = AWSRequest(
        method="POST",
        url=f"{api_url}/agent/{cluster}/reports",
        data=json.dumps(REPORT).encode(),
        headers={"Content-Type": "application/json"},
    )
    SigV4Auth(credentials, "execute-api", sandbox.region).add_auth(request)
    prepared = request.prepare()
    return requests.post(prepared.url, data=prepared.body, headers=dict(prepared.headers), timeout=30)


def stored(sandbox: Sandbox, cluster: str) -> Any:
    table = sandbox.stack.physical_id("StateTable")
    return AgentTable(table, dynamodb=sandbox.client("dynamodb")).agent(cluster)


def test_only_the_clusters_controller_role_may_report(sandbox: Sandbox, api_url: str) -> None:
    role_a, controller_a = slurm_cluster(sandbox, "agent-a", controller_route="POST/agent/agent-a/reports")
    # another cluster's controller, wrongly allowed every cluster's route
    role_b, controller_b = slurm_cluster(sandbox, "agent-b", controller_route="POST/agent/*/reports")
    iam = sandbox.client("iam")
    iam.create_user(UserName="mallory")
    iam.put_user_policy(
        UserName="mallory", PolicyName="agent", PolicyDocument=invoke_policy("POST/agent/*/reports")
    )
    key = iam.create_access_key(UserName="mallory")["AccessKey"]
    mallory = Credentials(key["AccessKeyId"], key["SecretAccessKey"])

    for forger in (
        as_session(sandbox, role_b, controller_b),
        mallory,
        as_session(sandbox, role_a, controller_b),
    ):
        refused = report(sandbox, api_url, "agent-a", forger)
        assert refused.status_code == 403, refused.text
        assert refused.json() == {"message": "not allowed to report for cluster 'agent-a'"}
    assert stored(sandbox, "agent-a") is None

    accepted = report(sandbox, api_url, "agent-a", as_session(sandbox, role_a, controller_a))
    assert accepted.status_code == 200, accepted.text
    assert accepted.json() == {"commands": [], "pollSeconds": 10}
    record = stored(sandbox, "agent-a")
    assert record is not None
    assert record.nodes["ip-10-1-2-3"].gpus == 8
    # its own role is allowed its own route only: API Gateway refuses it another cluster's
    assert report(sandbox, api_url, "agent-b", as_session(sandbox, role_a, controller_a)).status_code == 403
    assert stored(sandbox, "agent-b") is None
