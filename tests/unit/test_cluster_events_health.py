"""ClusterEventsFunction's Node Health branch: the state table on moto, Step Functions / SNS /
EventBridge on moto behind recorders, the cluster's shape from a stub (SageMaker clusters are the
sandbox's). Events are AWS's sample (events/hyperpod) varied with a small builder."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from autopilot.dal.healing import HealingTable
from autopilot.dal.state_table import StateTable
from autopilot.errors import WorkflowStartError
from autopilot.logic.cluster_events import Origin, handle_message
from autopilot.logic.healing.node_health import NodeHealing
from autopilot.logic.healing.start_repair import (
    WORKFLOW_DEADLINE_SECONDS,
    repair_deadlines,
    slurm_steps_seconds,
)
from autopilot.logic.healing.topology import ClusterTopology, TopologyReader
from autopilot.models.records import (
    Cluster,
    ClusterStatus,
    NodeHealth,
    Operation,
    OperationStatus,
    OperationType,
)
from autopilot.settings import HealingSettings
from autopilot.workflows.cluster_waits import ClusterWaits, Waiter
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.deploy import load_template
from tests.samples import load_event
from tests.samples.state_table import create_state_table

TABLE = "state"
ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "sample-cluster"
# the samples' cluster, account and region: ClusterEventsFunction's own in these tests
ARN = "arn:aws:sagemaker:us-west-2:111122223333:cluster/sample-cluster"
ORIGIN = Origin(account="111122223333", region="us-west-2")
NODE = "i-12345678abcdefghi"
T0 = "2026-11-22T10:00:00Z"
ROLE = "arn:aws:iam::123456789012:role/replace-node"


# HealingSettings as the template's defaults set them (the ARNs are each test's own).
SETTINGS_ENVIRON = {
    "STATE_TABLE_NAME": TABLE,
    "REPLACE_NODE_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:ReplaceNode",
    "ALERTS_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:alerts",
    "MAX_CONCURRENT_REPAIRS": "4",
    "MAX_UNHEALTHY_PERCENT": "20",
    "BREAKER_WINDOW_MINUTES": "10",
    "REBOOT_DEADLINE_MINUTES": "15",
    "HYPERPOD_REPAIR_DEADLINE_MINUTES": "90",
    "REPLACE_DEADLINE_MINUTES": "60",
    "DEEP_HEALTH_CHECK_MINUTES": "120",
    "ALLOW_LOGIN_REPLACE": "false",
    "DRAIN_TIMEOUT_MINUTES": "60",
}


def node_health(
    node: str = NODE,
    health: str = "Unhealthy",
    time: str = T0,
    *,
    fault_type: str = "NvidiaErrorTerminate",
    repair_action: str = "None",
) -> dict[str, Any]:
    event = copy.deepcopy(load_event("hyperpod/cluster_node_health_event.json"))
    event["time"] = time
    detail = event["detail"]
    detail["InstanceId"] = node
    summary = detail["HealthSummary"]
    summary["HealthStatus"] = health
    summary["RepairAction"] = repair_action
    summary["HealthStatusReason"] = summary["HealthStatusReason"].replace("NvidiaErrorTerminate", fault_type)
    if health == "Healthy":
        summary["HealthStatusReason"] = "The node is healthy."
    return event


class Recorder:
    """A boto3 client whose calls are recorded (botocore still validates them)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return method(**kwargs)

        return call

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kwargs for called, kwargs in self.calls if called == name]


class StubTopology(TopologyReader):
    def __init__(
        self,
        groups: dict[str, str],
        *,
        node_count: int = 10,
        automatic: bool = False,
        deep_health_groups: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self.groups = groups  # node id -> instance group
        self.node_count = node_count
        self.automatic = automatic  # DescribeCluster's NodeRecovery is Automatic
        self.deep_health_groups = deep_health_groups

    def cluster(self, cluster_name: str) -> ClusterTopology | None:
        return ClusterTopology(
            node_count=self.node_count,
            controller_groups=frozenset({"controller-machine"}),
            login_groups=frozenset({"login-nodes"}),
            automatic_recovery=self.automatic,
            deep_health_groups=self.deep_health_groups,
        )

    def node_group(self, cluster_name: str, node_id: str) -> str | None:
        return self.groups.get(node_id, "compute-nodes")


class StubNodes:
    """SageMaker for the node waits: every node Running."""

    def describe_cluster_node(self, **kwargs: Any) -> dict[str, Any]:
        return {"NodeDetails": {"InstanceStatus": {"Status": "Running"}}}


class TaskTokens:
    def __init__(self) -> None:
        self.answered: list[str] = []

    def send_task_success(self, *, taskToken: str, output: str) -> None:
        self.answered.append(taskToken)


class Healing:
    """Everything one test drives: the handler's dependencies and what they recorded."""

    def __init__(self, ddb: Any, *, topology: StubTopology, **settings: Any) -> None:
        self.ddb = ddb
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        machine = sfn.create_state_machine(
            name="ReplaceNode",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn=ROLE,
        )["stateMachineArn"]
        sns = boto3.client("sns", region_name="us-east-1")
        topic = sns.create_topic(Name="alerts")["TopicArn"]
        self.stepfunctions = Recorder(sfn)
        self.sns = Recorder(sns)
        self.events = Recorder(boto3.client("events", region_name="us-east-1"))
        self.settings = HealingSettings.model_validate(
            {
                **SETTINGS_ENVIRON,
                "REPLACE_NODE_STATE_MACHINE_ARN": machine,
                "ALERTS_TOPIC_ARN": topic,
                **settings,
            }
        )
        self.table = HealingTable(TABLE, dynamodb=ddb)
        self.healing = NodeHealing(
            self.settings,
            table=self.table,
            topology=topology,
            stepfunctions=self.stepfunctions,  # type: ignore[arg-type]
            events=self.events,  # type: ignore[arg-type]
            sns=self.sns,  # type: ignore[arg-type]
            now=lambda: datetime.fromisoformat("2026-11-22T10:00:05+00:00"),
        )
        self.tokens = TaskTokens()
        self.waits = ClusterWaits(TABLE, dynamodb=ddb, stepfunctions=self.tokens, sagemaker=StubNodes())  # type: ignore[arg-type]

    def deliver(self, event: dict[str, Any]) -> str:
        return handle_message(event, 1, self.waits, self.healing, origin=ORIGIN)

    def started(self) -> list[dict[str, Any]]:
        """The inputs of the ReplaceNode executions started."""
        return [json.loads(call["input"]) for call in self.stepfunctions.named("start_execution")]

    def operation(self, operation_id: str) -> Operation:
        found = self.table.get_operation(operation_id)
        assert found is not None
        return found

    def healing_events(self) -> list[dict[str, Any]]:
        return [e for call in self.events.named("put_events") for e in call["Entries"]]


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        register(client, ClusterStatus.ACTIVE)
        yield client


def register(ddb: Any, status: ClusterStatus, name: str = CLUSTER) -> None:
    cluster = Cluster(
        cluster_name=name,
        status=status,
        created_at="2026-11-22T09:00:00.000Z",
        updated_at="2026-11-22T09:00:00.000Z",
        last_operation_id="op-20261122090000-00000000",
        cluster_arn=ARN.replace(CLUSTER, name),
    )
    operation = Operation(
        operation_id=f"op-20261122090000-{len(name):08x}",
        operation_type=OperationType.CREATE_CLUSTER,
        cluster_name=name,
        status=OperationStatus.SUCCEEDED,
        created_at="2026-11-22T09:00:00.000Z",
        updated_at="2026-11-22T09:00:00.000Z",
    )
    StateTable(TABLE, client=ddb).start_create(cluster, operation)


@pytest.fixture
def env(ddb: Any) -> Healing:
    return Healing(
        ddb, topology=StubTopology({"i-controller": "controller-machine", "i-login": "login-nodes"})
    )


def test_an_unhealthy_worker_starts_one_recorded_replace(env: Healing) -> None:
    assert env.deliver(node_health()) == "SageMaker HyperPod Cluster Node Health Event"

    [execution] = env.stepfunctions.named("start_execution")
    workflow_input = json.loads(execution["input"])
    assert execution["name"] == workflow_input["operationId"]
    assert execution["stateMachineArn"] == env.settings.replace_node_state_machine_arn
    assert (workflow_input["nodeId"], workflow_input["action"], workflow_input["trigger"]) == (
        NODE,
        "replace",
        "event",
    )
    assert workflow_input["allowReplace"] is True
    assert workflow_input["deadlines"] == {
        "rebootSeconds": 900,
        "replaceSeconds": 3600,
        "hyperpodSeconds": 5400,
    }

    operation = env.operation(workflow_input["operationId"])
    assert (operation.operation_type, operation.status, operation.node_id) == (
        OperationType.REPLACE_NODE,
        OperationStatus.RUNNING,
        NODE,
    )
    assert operation.fault is not None
    assert (operation.fault.fault_type, operation.fault.repair_action, operation.fault.detected_at) == (
        "NvidiaErrorTerminate",
        "None",
        datetime.fromisoformat("2026-11-22T10:00:00.000Z"),
    )
    assert operation.execution_arn is not None
    assert operation.execution_arn.endswith(f":{operation.operation_id}")
    node = env.table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.health, node.open_repair, node.instance_group) == (
        NodeHealth.UNHEALTHY,
        operation.operation_id,
        "compute-nodes",
    )
    history = StateTable(TABLE, client=env.ddb).list_history(CLUSTER)
    assert history[0].operation_id == operation.operation_id


def test_duplicated_deliveries_start_nothing_more(env: Healing) -> None:
    for _ in range(3):
        env.deliver(node_health())
    assert len(env.started()) == 1

    # the repair ended (the workflow removed openRepair): the same fault delivered again starts nothing
    env.ddb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": f"CLUSTER#{CLUSTER}"}, "sk": {"S": f"NODE#{NODE}"}},
        UpdateExpression="REMOVE openRepair",
    )
    env.deliver(node_health())
    assert len(env.started()) == 1
    # a later fault of the node is a new repair
    env.deliver(node_health(time="2026-11-22T11:00:00Z"))
    assert len(env.started()) == 2


def test_an_unhealthy_report_older_than_the_one_held_starts_nothing(env: Healing) -> None:
    env.deliver(node_health(health="Healthy", time="2026-11-22T10:05:00Z"))
    env.deliver(node_health(time=T0))  # delivered late

    assert env.started() == []
    node = env.table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.health, node.health_since) == (
        NodeHealth.HEALTHY,
        datetime.fromisoformat("2026-11-22T10:05:00Z"),
    )


def test_a_healthy_report_is_held_and_resumes_the_repair_waiting_on_the_node(env: Healing) -> None:
    env.deliver(node_health())
    env.waits.put_waiter(
        Waiter(
            cluster_name=CLUSTER,
            execution_arn="arn:aws:states:us-east-1:123456789012:execution:ReplaceNode:op-1",
            until="Healthy",
            task_token="token-1",
            sent_at=2,
            node_id=NODE,
        )
    )
    env.deliver(node_health(health="Healthy", time="2026-11-22T10:04:00Z"))

    assert env.tokens.answered == ["token-1"]
    assert len(env.started()) == 1  # the Healthy report started nothing
    node = env.table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.health, node.health_reason) == (NodeHealth.HEALTHY, "The node is healthy.")


@pytest.mark.parametrize(
    "forge",
    [
        {"account": "444455556666"},
        {"region": "eu-west-1"},
        {"source": "custom.sagemaker"},
        {"detail": {"ClusterArn": "arn:aws:sagemaker:us-west-2:444455556666:cluster/sample-cluster"}},
    ],
    ids=["account", "region", "source", "cluster-arn"],
)
def test_a_forged_node_health_event_neither_starts_nor_ends_a_repair(
    env: Healing, forge: dict[str, Any]
) -> None:
    """Issue 20: a forged Unhealthy report replaced a worker; a forged Healthy one would end a repair
    before SageMaker's node is back."""

    def forged(event: dict[str, Any]) -> dict[str, Any]:
        event.update({k: v for k, v in forge.items() if k != "detail"})
        event["detail"].update(forge.get("detail", {}))
        return event

    assert env.deliver(forged(node_health())) == "untrusted"
    assert env.started() == []
    assert env.table.get_node(CLUSTER, NODE) is None

    env.deliver(node_health())  # the real fault: its repair waits on the node
    env.waits.put_waiter(
        Waiter(
            cluster_name=CLUSTER,
            execution_arn="arn:aws:states:us-east-1:123456789012:execution:ReplaceNode:op-1",
            until="Healthy",
            task_token="token-1",
            sent_at=2,
            node_id=NODE,
        )
    )
    assert env.deliver(forged(node_health(health="Healthy", time="2026-11-22T10:04:00Z"))) == "untrusted"
    assert env.tokens.answered == []
    node = env.table.get_node(CLUSTER, NODE)
    assert node is not None
    assert node.health == NodeHealth.UNHEALTHY


def test_an_unhealthy_controller_is_alerted_never_replaced(env: Healing) -> None:
    env.deliver(node_health("i-controller"))
    [started] = env.started()
    assert (started["action"], started["allowReplace"]) == ("alert", False)


@pytest.mark.parametrize(("allowed", "action"), [("false", "reboot"), ("true", "replace")])
def test_a_login_node_is_rebooted_unless_login_replace_is_allowed(
    ddb: Any, allowed: str, action: str
) -> None:
    env = Healing(ddb, topology=StubTopology({"i-login": "login-nodes"}), ALLOW_LOGIN_REPLACE=allowed)
    env.deliver(node_health("i-login"))
    [started] = env.started()
    assert (started["action"], started["allowReplace"]) == (action, allowed == "true")


@pytest.mark.parametrize("repair_action", ["None", "Reboot"])
def test_on_an_automatic_cluster_hyperpods_own_repair_is_observed_whatever_repair_action_says(
    ddb: Any, repair_action: str
) -> None:
    # AWS's only Node Health sample says "None" (with "Please Replace the Faulty Node."): on a
    # NodeRecovery Automatic cluster that used to start Autopilot's replace beside HyperPod's own.
    env = Healing(ddb, topology=StubTopology({}, automatic=True))
    env.deliver(node_health(repair_action=repair_action, fault_type="NvidiaErrorReboot"))
    [started] = env.started()
    assert started["action"] == "observe"
    assert env.operation(started["operationId"]).actor is not None
    assert env.operation(started["operationId"]).actor.value == "hyperpod"  # type: ignore[union-attr]


def test_on_a_manual_cluster_autopilot_repairs_even_when_repair_action_names_one(env: Healing) -> None:
    # NodeRecovery None: HyperPod repairs nothing, so a RepairAction naming a repair must not leave the
    # node to it (nobody would act); the remedy follows the fault type.
    env.deliver(node_health(repair_action="Reboot", fault_type="NvidiaErrorTerminate"))
    [started] = env.started()
    assert started["action"] == "replace"
    assert env.operation(started["operationId"]).actor.value == "autopilot"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fault_type", "lost"), [("NvidiaErrorTerminate", True), ("NvidiaErrorReboot", False)]
)
def test_the_workflow_is_told_whether_the_fault_took_the_gpus(
    env: Healing, fault_type: str, lost: bool
) -> None:
    # a Slurm-aware repair waits DrainTimeoutMinutes for the jobs only where they can still run
    env.deliver(node_health(fault_type=fault_type))
    [started] = env.started()
    assert started["gpusLost"] is lost


def test_the_deep_health_allowance_never_takes_a_repair_past_the_workflows_own_timeout() -> None:
    # every deadline parameter at its template MaxValue: the allowance shrinks so that a slot wait,
    # HyperPod's repair (or a reboot) and a replace still end before the workflow's 24 h TimeoutSeconds
    parameters = load_template(ROOT / "template.yaml")["Parameters"]
    names = {
        "REBOOT_DEADLINE_MINUTES": "RebootDeadlineMinutes",
        "REPLACE_DEADLINE_MINUTES": "ReplaceDeadlineMinutes",
        "HYPERPOD_REPAIR_DEADLINE_MINUTES": "HyperPodRepairDeadlineMinutes",
        "DEEP_HEALTH_CHECK_MINUTES": "DeepHealthCheckMinutes",
        "DRAIN_TIMEOUT_MINUTES": "DrainTimeoutMinutes",
    }
    environ = {**SETTINGS_ENVIRON, **{var: str(parameters[name]["MaxValue"]) for var, name in names.items()}}
    settings = HealingSettings.model_validate(environ)
    deadlines = repair_deadlines(settings, deep_health_checks=True)
    longest = 2 * deadlines.replace_seconds + max(deadlines.reboot_seconds, deadlines.hyperpod_seconds)
    longest += slurm_steps_seconds(settings)  # drain, the wait for the jobs, requeue, resume
    assert longest <= WORKFLOW_DEADLINE_SECONDS
    assert deadlines.replace_seconds > parameters["ReplaceDeadlineMinutes"]["MaxValue"] * 60


def test_a_deep_health_group_gets_the_check_time_on_its_replace_and_hyperpod_deadlines(ddb: Any) -> None:
    # A new instance of a group with OnStartDeepHealthChecks spends ~2 h in checks before Running:
    # within ReplaceDeadlineMinutes (60) alone, a replace working as designed timed out.
    env = Healing(ddb, topology=StubTopology({}, deep_health_groups=frozenset({"compute-nodes"})))
    env.deliver(node_health())
    [started] = env.started()
    assert started["deadlines"] == {
        "rebootSeconds": 900,
        "replaceSeconds": (60 + 120) * 60,
        "hyperpodSeconds": (90 + 120) * 60,
    }


def test_the_breaker_trips_once_and_no_repair_starts_while_paused(env: Healing) -> None:
    # 10 nodes, MaxUnhealthyPercent 20: the third unhealthy node within the window trips the breaker
    for i in range(6):
        env.deliver(node_health(f"i-{i}", time=f"2026-11-22T10:0{i}:00Z"))
        env.deliver(node_health(f"i-{i}", time=f"2026-11-22T10:0{i}:00Z"))  # each event twice

    assert [s["nodeId"] for s in env.started()] == ["i-0", "i-1"]
    [alert] = env.sns.named("publish")
    assert alert["TopicArn"] == env.settings.alerts_topic_arn
    assert CLUSTER in alert["Subject"]
    assert alert["MessageAttributes"]["kind"]["StringValue"] == "HealingPaused"
    [paused] = [e for e in env.healing_events() if e["DetailType"] == "Healing Paused"]
    detail = json.loads(paused["Detail"])
    assert (detail["clusterName"], detail["pausedBy"], detail["unhealthyNodes"], detail["nodeCount"]) == (
        CLUSTER,
        "breaker",
        ["i-0", "i-1", "i-2"],
        10,
    )
    state = env.table.get_healing(CLUSTER)
    tripped = datetime.fromisoformat("2026-11-22T10:02:00Z")
    assert (state.paused, state.paused_by, state.tripped_at) == (True, "breaker", tripped)
    # the nodes it held back stay Unhealthy, without a repair, for the sweep to find after resume
    held = env.table.get_node(CLUSTER, "i-5")
    assert held is not None
    assert (held.health, held.open_repair) == (NodeHealth.UNHEALTHY, None)


class FailingOnce:
    """SNS whose first Publish fails (throttled past the SDK's retries)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def publish(self, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "Publish")
        return self._client.publish(**kwargs)


def test_a_trip_alert_that_could_not_be_sent_is_sent_by_the_redelivery_once(env: Healing) -> None:
    flaky = FailingOnce(env.sns)
    env.healing._sns = flaky  # type: ignore[assignment]
    env.deliver(node_health("i-0", time="2026-11-22T10:00:00Z"))
    env.deliver(node_health("i-1", time="2026-11-22T10:01:00Z"))
    tripping = node_health("i-2", time="2026-11-22T10:02:00Z")

    with pytest.raises(ClientError):
        env.deliver(tripping)  # the queue delivers it again
    assert env.table.get_healing(CLUSTER).paused
    env.deliver(tripping)
    env.deliver(node_health("i-3", time="2026-11-22T10:03:00Z"))
    env.deliver(tripping)

    assert flaky.failed
    [alert] = env.sns.named("publish")
    assert CLUSTER in alert["Subject"]
    assert [e["DetailType"] for e in env.healing_events()].count("Healing Paused") == 1
    assert not env.table.get_healing(CLUSTER).trip_alert_pending


def test_reports_older_than_the_window_do_not_count(env: Healing) -> None:
    env.deliver(node_health("i-0", time="2026-11-22T10:00:00Z"))
    env.deliver(node_health("i-1", time="2026-11-22T10:11:00Z"))  # i-0's report left the window
    env.deliver(node_health("i-2", time="2026-11-22T10:12:00Z"))

    assert len(env.started()) == 3
    assert env.sns.named("publish") == []
    assert env.table.get_healing(CLUSTER).unhealthy_reports == {
        "i-1": datetime.fromisoformat("2026-11-22T10:11:00Z"),
        "i-2": datetime.fromisoformat("2026-11-22T10:12:00Z"),
    }


def test_an_operator_pause_holds_back_repairs_without_a_second_alert(env: Healing) -> None:
    assert env.table.pause(
        CLUSTER, by="arn:aws:iam::123456789012:user/ann", reason="maintenance", now=datetime.fromisoformat(T0)
    )
    env.deliver(node_health())
    assert env.started() == []
    assert env.sns.named("publish") == []


@pytest.mark.parametrize("status", [ClusterStatus.CREATING, ClusterStatus.DELETING])
def test_clusters_autopilot_does_not_heal_are_left_alone(ddb: Any, status: ClusterStatus) -> None:
    register(ddb, status, "other")
    env = Healing(ddb, topology=StubTopology({}))
    event = node_health()
    event["detail"]["ClusterName"] = "other"
    env.deliver(event)
    event["detail"]["ClusterName"] = "unknown"
    env.deliver(event)
    assert env.started() == []
    assert env.table.get_node("other", NODE) is None


def test_a_repair_that_cannot_start_is_failed_and_its_fault_claimable_again(ddb: Any) -> None:
    env = Healing(
        ddb,
        topology=StubTopology({}),
        REPLACE_NODE_STATE_MACHINE_ARN="arn:aws:states:us-east-1:123456789012:stateMachine:Missing",
    )
    with pytest.raises(WorkflowStartError) as raised:
        env.deliver(node_health())

    failed = env.operation(raised.value.operation_id)
    assert failed.status is OperationStatus.FAILED
    assert failed.error is not None
    assert failed.error.error == "StepFunctions.StateMachineDoesNotExist"
    [event] = env.healing_events()
    assert json.loads(event["Detail"])["operationId"] == failed.operation_id
    node = env.table.get_node(CLUSTER, NODE)
    assert node is not None
    assert (node.open_repair, node.last_fault_at) == (None, None)

    # SQS delivers the message again, now that Step Functions answers
    retry = Healing(ddb, topology=StubTopology({}))
    retry.deliver(node_health())
    assert len(retry.started()) == 1


def test_a_repair_is_never_recorded_as_older_than_its_event(env: Healing) -> None:
    # the event's clock (HyperPod's; the sandbox's) is ahead of this function's
    env.deliver(node_health(time="2026-11-22T12:00:00Z"))
    [started] = env.started()
    operation = env.operation(started["operationId"])
    assert operation.created_at == datetime.fromisoformat("2026-11-22T12:00:00Z")
    assert operation.operation_id.startswith("op-20261122120000-")
