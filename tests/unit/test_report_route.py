"""AgentFunction's handler (functions/agent/app.py): the report route's answers — 200 with the pending
commands, 403 (counted, nothing stored), 404, 409, 400 naming the field — and the workflow's direct
invokes. The state table is moto's; SageMaker's answers come from botocore's Stubber."""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from autopilot import aws
from autopilot.dal.agent import AgentTable
from autopilot.logic.agent.reports import AgentDeps
from autopilot.logic.agent.trust import ControllerReader
from autopilot.models.records import iso
from autopilot.settings import agent_settings
from botocore.stub import Stubber
from moto import mock_aws

from tests.samples import load_event
from tests.samples.state_table import create_state_table

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # the sample event's and the function's
ROLE = f"arn:aws:iam::{ACCOUNT}:role/ml-cluster-controller-role"
T0 = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agent_app", ROOT / "functions/agent/app.py")
    assert spec is not None
    assert spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app


class Context:
    function_name = "AgentFunction"
    memory_limit_in_mb = 256
    invoked_function_arn = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:AgentFunction"
    aws_request_id = "00000000-0000-4000-8000-000000000000"


def described(*, eks: bool = False) -> dict[str, Any]:
    return {
        "ClusterArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abc123def456",
        "ClusterName": "ml-cluster",
        "ClusterStatus": "InService",
        "InstanceGroups": [
            {
                "InstanceGroupName": "controller-machine",
                "ExecutionRole": ROLE,
                "SlurmConfig": {"NodeType": "Controller"},
            }
        ],
        "Orchestrator": {"Eks": {"ClusterArn": f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/k"}}
        if eks
        else {"Slurm": {}},
    }


class Handler:
    def __init__(self, app: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
        self.app = app
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(dynamodb)
        self.sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        self.stub = Stubber(self.sagemaker)
        self.deps = AgentDeps(
            agents=AgentTable("state", dynamodb=dynamodb),
            controllers=ControllerReader(sagemaker=self.sagemaker),
            stepfunctions=boto3.client("stepfunctions", region_name="us-east-1"),
            poll_seconds=10,
            account=ACCOUNT,
            now=lambda: T0,
        )
        monkeypatch.setattr(app, "deps", lambda: self.deps)
        monkeypatch.setattr(app.metrics.provider, "namespace", "Test")

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        return dict(self.app.lambda_handler(event, Context()))

    def cluster(self, answer: dict[str, Any] | None = None) -> None:
        if answer is None:
            self.stub.add_client_error("describe_cluster", "ResourceNotFound", http_status_code=400)
        else:
            self.stub.add_response("describe_cluster", answer, {"ClusterName": "ml-cluster"})
        # the sample's session is an instance id: the controller group's instances are listed
        if answer is not None and "Slurm" in answer["Orchestrator"]:
            self.stub.add_response(
                "list_cluster_nodes",
                {
                    "ClusterNodeSummaries": [
                        {
                            "InstanceGroupName": "controller-machine",
                            "InstanceId": "i-0a1b2c3d4e5f60718",
                            "InstanceType": "ml.m5.xlarge",
                            "LaunchTime": T0,
                            "InstanceStatus": {"Status": "Running"},
                        }
                    ]
                },
            )


def test_the_wiring_takes_the_stacks_account_off_its_alerts_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the stack's own roles may report: its account, read without an STS call or the context.
    environment = {
        "STATE_TABLE_NAME": "state",
        "AGENT_POLL_SECONDS": "10",
        "ALERTS_TOPIC_ARN": f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    agent_settings.cache_clear()
    app = load_app()
    try:
        with mock_aws():
            built = app.deps()
            assert (built.account, built.poll_seconds) == (ACCOUNT, 10)
            assert app.deps() is built  # one per execution environment
            # chargeback's intake: built on the first report with jobs, then kept
            assert callable(built.usage)
            usage = built.usage()
            assert usage.alerts_topic_arn == f"arn:aws:sns:us-east-1:{ACCOUNT}:alerts"
            assert built.usage() is usage
    finally:
        agent_settings.cache_clear()
        aws.client.cache_clear()


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[Handler]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        made = Handler(load_app(), monkeypatch)
        with made.stub:
            yield made


def report(*, caller: str | None = None, body: Any = ...) -> dict[str, Any]:
    event = copy.deepcopy(load_event("agent/report.json"))
    if caller is not None:
        event["requestContext"]["identity"]["userArn"] = caller
    if body is not ...:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    return event


def test_the_controllers_report_is_stored_and_answered_with_the_pending_commands(handler: Handler) -> None:
    handler.cluster(described())
    answer = handler(report())
    assert (answer["statusCode"], json.loads(answer["body"])) == (200, {"commands": [], "pollSeconds": 10})
    stored = handler.deps.agents.agent("ml-cluster")
    assert stored is not None
    assert (iso(stored.last_seen), stored.agent_version) == ("2026-11-27T21:00:00.000Z", "1.0.0")
    assert stored.nodes["ip-10-1-2-4"].state == "IDLE+DRAIN"


@pytest.mark.parametrize(
    "caller",
    [
        f"arn:aws:iam::{ACCOUNT}:user/mallory",
        f"arn:aws:iam::{ACCOUNT}:root",
        "arn:aws:sts::999988887777:assumed-role/ml-cluster-controller-role/i-0a1b2c3d4e5f60718",
    ],
    ids=["an IAM user", "root", "another account"],
)
@pytest.mark.parametrize("cluster", [None, described(), described(eks=True)], ids=["unknown", "slurm", "eks"])
def test_a_caller_not_an_assumed_role_of_the_account_learns_nothing_of_the_cluster(
    handler: Handler, capsys: pytest.CaptureFixture[str], caller: str, cluster: dict[str, Any] | None
) -> None:
    # whatever the cluster is (none, Slurm, EKS), the same flat 403: SageMaker is not even asked
    handler.cluster(cluster)
    answer = handler(report(caller=caller))
    assert answer["statusCode"] == 403
    assert json.loads(answer["body"]) == {"message": "not allowed to report for cluster 'ml-cluster'"}
    assert handler.deps.agents.agent("ml-cluster") is None
    emitted = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert [m.get("UntrustedAgentReports") for m in emitted] == [[1.0]]
    with pytest.raises(AssertionError, match="remaining in queue"):
        handler.stub.assert_no_pending_responses()  # the DescribeCluster queued was never called


@pytest.mark.parametrize(
    ("answer", "status", "message"),
    [
        (None, 404, "cluster 'ml-cluster' not found"),
        (described(eks=True), 409, "orchestrated by EKS"),
    ],
    ids=["unknown cluster", "EKS"],
)
def test_a_cluster_with_no_agent_to_trust(
    handler: Handler, answer: dict[str, Any] | None, status: int, message: str
) -> None:
    handler.cluster(answer)
    response = handler(report())
    assert response["statusCode"] == status
    assert message in json.loads(response["body"])["message"]
    assert handler.deps.agents.agent("ml-cluster") is None


@pytest.mark.parametrize(
    ("body", "message"),
    [("{not json", "the body must be a JSON object"), ({"agentVersion": "1.0.0"}, "sentAt: Field required")],
)
def test_a_trusted_callers_malformed_report_is_a_400_naming_the_field(
    handler: Handler, body: Any, message: str
) -> None:
    handler.cluster(described())
    response = handler(report(body=body))
    assert (response["statusCode"], json.loads(response["body"])) == (400, {"message": message})


def test_aws_throttling_during_a_report_is_a_503_with_retry_after_not_a_502(handler: Handler) -> None:
    handler.stub.add_client_error("describe_cluster", "ThrottlingException", http_status_code=400)
    response = handler(report())
    assert response["statusCode"] == 503
    assert int(response["headers"]["Retry-After"]) > 0


def test_the_workflows_command_and_status_invokes(handler: Handler) -> None:
    queued = handler(
        {
            "command": {
                "clusterName": "ml-cluster",
                "node": "ip-10-1-2-3",
                "verb": "resume",
                "operationId": "op-1",
                "timeoutSeconds": 1800,
                "taskToken": "token-1",
                "instanceType": "ml.p5.48xlarge",
            }
        }
    )
    assert queued["deadline"] == "2026-11-27T21:30:00.000Z"
    stored = handler.deps.agents.command("ml-cluster", queued["commandId"])
    assert stored is not None
    assert (stored.expected_gpus, stored.task_token) == (8, "token-1")
    handler.stub.add_response("describe_cluster", described(), {"ClusterName": "ml-cluster"})
    assert handler({"status": {"clusterName": "ml-cluster"}}) == {
        "status": "absent",
        "lastSeen": None,
        "version": None,
        "slurm": True,
        "nodes": {},
    }


@pytest.mark.parametrize(
    "command",
    [
        {"verb": "drain"},  # drain names its reason
        {"verb": "resume"},  # resume needs the instance type
        {"verb": "await_idle", "reason": "x"},
        {"verb": "reboot"},  # not in the agent's vocabulary
        {"verb": "drain", "reason": "r", "node": "ip-1 ; rm -rf /"},
    ],
)
def test_a_malformed_command_is_refused_before_anything_is_stored(
    handler: Handler, command: dict[str, Any]
) -> None:
    request = {
        "clusterName": "ml-cluster",
        "node": "ip-10-1-2-3",
        "operationId": "op-1",
        "timeoutSeconds": 60,
        "taskToken": "t",
        **command,
    }
    with pytest.raises(ValueError, match="validation error"):
        handler({"command": request})
    assert handler.deps.agents.pending_commands("ml-cluster", after=datetime.min.replace(tzinfo=UTC)) == []
