"""Acceptance for the sandbox: `python -m sandbox up` serves an AWS endpoint that a plain boto3
client can drive like AWS — HyperPod cluster lifecycle, node reboot/replace (26 ids rejected),
delete, and SSM sessions — and `python -m sandbox invoke` runs a template function."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events" / "api"
CONFIG = json.loads((ROOT / "tests/fixtures/configs/slurm/cluster-config.json").read_text())
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def _wait_for(predicate: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def aws_url() -> Iterator[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "up", "--api-port", "0", "--aws-port", "0", "--speed", "1200"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        output = ""
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline and not output.rstrip().endswith("stop.") and "Ctrl-C" not in output
        ):
            line = process.stdout.readline()
            if not line:
                break
            output += line
        match = re.search(r"AWS endpoint:\s+(\S+)", output)
        assert match, f"sandbox up did not print its AWS endpoint:\n{output}"
        yield match.group(1)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _client(service: str, url: str, region: str = "us-east-1") -> Any:
    # One attempt: the test wants to see AWS's errors, not botocore's retries of them.
    return boto3.client(
        service,
        endpoint_url=url,
        config=Config(retries={"total_max_attempts": 1}),
        region_name=region,
        aws_access_key_id=CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=CREDENTIALS["aws_secret_access_key"],
    )


def test_plain_boto3_drives_a_cluster_through_its_lifecycle(aws_url: str) -> None:
    sagemaker = _client("sagemaker", aws_url)
    config = {**CONFIG, "ClusterName": "acceptance"}
    arn = sagemaker.create_cluster(**config)["ClusterArn"]
    assert re.fullmatch(r"arn:aws:sagemaker:us-east-1:\d{12}:cluster/[a-z0-9]{12}", arn)
    assert sagemaker.describe_cluster(ClusterName="acceptance")["ClusterStatus"] == "Creating"

    _wait_for(
        lambda: sagemaker.describe_cluster(ClusterName="acceptance")["ClusterStatus"] == "InService",
        "the cluster to reach InService",
    )
    pages = sagemaker.get_paginator("list_cluster_nodes").paginate(
        ClusterName="acceptance", PaginationConfig={"PageSize": 1}
    )
    nodes = [node for page in pages for node in page["ClusterNodeSummaries"]]
    expected = sum(group["InstanceCount"] for group in CONFIG["InstanceGroups"])
    assert len(nodes) == expected
    workers = [n for n in nodes if "controller" not in n["InstanceGroupName"]]
    worker = workers[0]["InstanceId"]

    rebooted = sagemaker.batch_reboot_cluster_nodes(
        ClusterName="acceptance", NodeIds=[worker, "i-0000000000000dead"]
    )
    assert rebooted["Successful"] == [worker]
    assert rebooted["Failed"][0]["ErrorCode"] == "InstanceIdNotFound"

    with pytest.raises(ClientError) as too_many:
        sagemaker.batch_replace_cluster_nodes(
            ClusterName="acceptance", NodeIds=[f"i-{n:017x}" for n in range(26)]
        )
    assert too_many.value.response["Error"]["Code"] == "ValidationException"
    assert "25" in too_many.value.response["Error"]["Message"]

    _wait_for(
        lambda: (
            sagemaker.describe_cluster_node(ClusterName="acceptance", NodeId=worker)["NodeDetails"][
                "InstanceStatus"
            ]["Status"]
            == "Running"
        ),
        "the rebooted node to run again",
    )
    replaced = sagemaker.batch_replace_cluster_nodes(ClusterName="acceptance", NodeIds=[worker])
    assert replaced["Successful"] == [worker]

    def successor() -> bool:
        ids = {
            n["InstanceId"]
            for n in sagemaker.list_cluster_nodes(ClusterName="acceptance")["ClusterNodeSummaries"]
        }
        return worker not in ids and len(ids) == expected

    _wait_for(successor, "the replaced node to get a new instance id")

    sagemaker.delete_cluster(ClusterName="acceptance")

    def gone() -> bool:
        try:
            sagemaker.describe_cluster(ClusterName="acceptance")
        except ClientError as error:
            return error.response["Error"]["Code"] == "ResourceNotFound"
        return False

    _wait_for(gone, "the cluster to be deleted")


def test_plain_boto3_uses_ssm_sessions(aws_url: str) -> None:
    # A region that is not the sandbox's: Session Manager and HyperPod answer there too.
    sagemaker = _client("sagemaker", aws_url, region="us-west-2")
    ssm = _client("ssm", aws_url, region="us-west-2")
    arn = sagemaker.create_cluster(**{**CONFIG, "ClusterName": "ssm-target"})["ClusterArn"]
    _wait_for(
        lambda: sagemaker.describe_cluster(ClusterName="ssm-target")["ClusterStatus"] == "InService",
        "the cluster to reach InService",
    )
    node = next(
        n
        for n in sagemaker.list_cluster_nodes(ClusterName="ssm-target")["ClusterNodeSummaries"]
        if n["InstanceStatus"]["Status"] == "Running"
    )
    target = f"sagemaker-cluster:{arn.rsplit('/', 1)[-1]}_{node['InstanceGroupName']}-{node['InstanceId']}"
    with pytest.raises(ClientError) as not_a_node:  # only a live HyperPod node is connected
        ssm.start_session(Target="sagemaker-cluster:abcdef123456_login-group-i-0123456789abcdef0")
    assert not_a_node.value.response["Error"]["Code"] == "TargetNotConnected"

    session_id = ssm.start_session(Target=target)["SessionId"]
    active = ssm.describe_sessions(State="Active", Filters=[{"key": "Target", "value": target}])["Sessions"]
    assert [s["SessionId"] for s in active] == [session_id]
    assert active[0]["Owner"].startswith("arn:aws:iam::")  # an IAM ARN, as AWS reports the caller
    ssm.terminate_session(SessionId=session_id)

    def terminated() -> bool:
        history = ssm.describe_sessions(State="History")["Sessions"]
        return any(s["SessionId"] == session_id and s["Status"] == "Terminated" for s in history)

    _wait_for(terminated, "the session to pass Terminating and end")
    still_active = ssm.describe_sessions(State="Active", Filters=[{"key": "Target", "value": target}])
    assert still_active["Sessions"] == []
    sagemaker.delete_cluster(ClusterName="ssm-target")


def test_invoke_runs_a_template_function() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sandbox", "invoke", "ApiFunction", "--event", str(EVENTS / "validate.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    response = json.loads(result.stdout)
    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert body["valid"] is True
    assert body["errors"] == []
