"""The healing policy (autopilot.logic.healing.decide): HMA fault type and Recommendation → action,
controller and login nodes, HyperPod's own repairs; the breaker's threshold; where a node's role comes
from (autopilot.logic.healing.topology)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from autopilot.logic.healing.breaker import breaker_trips
from autopilot.logic.healing.decide import NodeRole, decide, fault_type_of, gpus_lost
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.records import Fault, NodeAction, RepairActor
from botocore.exceptions import ClientError

from tests.samples import load_event

SAMPLE = load_event("hyperpod/cluster_node_health_event.json")["detail"]["HealthSummary"]


def fault(
    fault_type: str | None = None,
    *,
    repair_action: str = "None",
    recommendation: str | None = None,
    reason: str | None = None,
) -> Fault:
    if reason is None and fault_type is not None:
        reason = SAMPLE["HealthStatusReason"].replace("NvidiaErrorTerminate", fault_type)
    return Fault(
        reason=reason,
        repair_action=repair_action,
        recommendation=recommendation,
        detected_at="2026-11-22T10:00:00.000Z",
    )


def test_the_fault_type_is_read_from_aws_sample_reason() -> None:
    assert fault_type_of(SAMPLE["HealthStatusReason"]) == "NvidiaErrorTerminate"
    assert fault_type_of("the node is unhealthy") is None
    assert fault_type_of(None) is None


@pytest.mark.parametrize(
    ("fault_type", "action"),
    [
        ("NvidiaErrorReboot", NodeAction.REBOOT),
        ("NvidiaGpuCountMismatch", NodeAction.REBOOT),
        ("NeuronErrorReboot", NodeAction.REBOOT),
        ("NvidiaErrorTerminate", NodeAction.REPLACE),
        ("NeuronErrorTerminate", NodeAction.REPLACE),
    ],
)
def test_known_fault_types_on_a_worker(fault_type: str, action: NodeAction) -> None:
    decision = decide(fault(fault_type), NodeRole.WORKER, hyperpod_repairs=False, allow_login_replace=False)
    assert (decision.action, decision.actor, decision.allow_replace) == (action, RepairActor.AUTOPILOT, True)


@pytest.mark.parametrize(
    ("fault_type", "lost"),
    [
        ("NvidiaErrorTerminate", True),
        ("NeuronErrorTerminate", True),
        ("NvidiaGpuCountMismatch", True),
        ("NvidiaErrorReboot", False),
        ("NeuronErrorReboot", False),
        (None, False),
    ],
)
def test_which_faults_took_the_nodes_gpus(fault_type: str | None, lost: bool) -> None:
    # read from the HealthStatusReason as the event carries it (fault_type unset, as in the event path)
    assert gpus_lost(fault(fault_type)) is lost
    assert gpus_lost(None) is False  # an operator's repair: the jobs get the drain wait


def test_the_fault_type_outranks_the_recommendation() -> None:
    decision = decide(
        fault("NvidiaErrorReboot", recommendation="Please Replace the Faulty Node."),
        NodeRole.WORKER,
        hyperpod_repairs=False,
        allow_login_replace=False,
    )
    assert decision.action is NodeAction.REBOOT


@pytest.mark.parametrize(
    ("recommendation", "action"),
    [
        ("Please Reboot the Faulty Node.", NodeAction.REBOOT),
        ("Please Replace the Faulty Node.", NodeAction.REPLACE),
        (None, NodeAction.REPLACE),
        ("Contact support.", NodeAction.REPLACE),
    ],
)
def test_an_unknown_fault_type_follows_the_recommendation_else_replace(
    recommendation: str | None, action: NodeAction
) -> None:
    decision = decide(
        fault("EfaLinkFlapping", recommendation=recommendation),
        NodeRole.WORKER,
        hyperpod_repairs=False,
        allow_login_replace=False,
    )
    assert decision.action is action


def test_a_fault_with_no_reason_at_all_is_replaced() -> None:
    assert (
        decide(fault(), NodeRole.WORKER, hyperpod_repairs=False, allow_login_replace=False).action
        is NodeAction.REPLACE
    )


@pytest.mark.parametrize("repair_action", ["None", "Reboot", "Replace"])
@pytest.mark.parametrize("fault_type", ["NvidiaErrorTerminate", "NvidiaErrorReboot"])
def test_a_controller_is_never_acted_on_only_alerted(repair_action: str, fault_type: str) -> None:
    decision = decide(
        fault(fault_type, repair_action=repair_action),
        NodeRole.CONTROLLER,
        hyperpod_repairs=False,
        allow_login_replace=True,
    )
    assert (decision.action, decision.allow_replace) == (NodeAction.ALERT, False)


def test_a_login_node_is_rebooted_not_replaced_unless_allowed() -> None:
    refused = decide(
        fault("NvidiaErrorTerminate"), NodeRole.LOGIN, hyperpod_repairs=False, allow_login_replace=False
    )
    assert (refused.action, refused.allow_replace) == (NodeAction.REBOOT, False)
    assert "AllowLoginReplace" in refused.why

    allowed = decide(
        fault("NvidiaErrorTerminate"), NodeRole.LOGIN, hyperpod_repairs=False, allow_login_replace=True
    )
    assert (allowed.action, allowed.allow_replace) == (NodeAction.REPLACE, True)

    rebooted = decide(
        fault("NvidiaErrorReboot"), NodeRole.LOGIN, hyperpod_repairs=False, allow_login_replace=False
    )
    assert (rebooted.action, rebooted.allow_replace) == (NodeAction.REBOOT, False)


@pytest.mark.parametrize("repair_action", ["None", "Reboot", "Replace"])
def test_on_an_automatic_cluster_hyperpod_repairs_whatever_the_repair_action_says(repair_action: str) -> None:
    # AWS's only Node Health sample says "None" beside "Please Replace the Faulty Node.": read as "nobody
    # repairs", it made Autopilot a second actor on a node HyperPod repairs (NodeRecovery Automatic).
    decision = decide(
        fault("NvidiaErrorTerminate", repair_action=repair_action),
        NodeRole.WORKER,
        hyperpod_repairs=True,
        allow_login_replace=False,
    )
    assert (decision.action, decision.actor, decision.allow_replace) == (
        NodeAction.OBSERVE,
        RepairActor.HYPERPOD,
        True,
    )
    login = decide(
        fault("NvidiaErrorTerminate", repair_action=repair_action),
        NodeRole.LOGIN,
        hyperpod_repairs=True,
        allow_login_replace=False,
    )
    assert (login.action, login.allow_replace) == (NodeAction.OBSERVE, False)


@pytest.mark.parametrize(
    ("repair_action", "action"), [("Reboot", NodeAction.REBOOT), ("Replace", NodeAction.REPLACE)]
)
def test_on_a_manual_cluster_autopilot_repairs_and_reads_repair_action_as_a_hint(
    repair_action: str, action: NodeAction
) -> None:
    # NodeRecovery None: HyperPod does nothing, whatever the event names; an unknown fault type takes
    # the RepairAction's remedy before the Recommendation's.
    decision = decide(
        fault("EfaLinkFlapping", repair_action=repair_action, recommendation="Please Replace the Node."),
        NodeRole.WORKER,
        hyperpod_repairs=False,
        allow_login_replace=False,
    )
    assert (decision.action, decision.actor) == (action, RepairActor.AUTOPILOT)


@pytest.mark.parametrize(
    ("unhealthy", "nodes", "percent", "trips"),
    [
        (51, 256, 20, False),  # 19.9 %
        (52, 256, 20, True),  # 20.3 %
        (2, 10, 20, False),  # exactly 20 % is not more than 20 %
        (3, 10, 20, True),
        (1, 2, 20, False),  # one fault alone is never correlated
        (2, 3, 20, True),
    ],
)
def test_the_breaker_trips_above_the_percentage_of_at_least_two_nodes(
    unhealthy: int, nodes: int, percent: int, trips: bool
) -> None:
    assert breaker_trips(unhealthy, nodes, percent) is trips


class StubSageMaker:
    def __init__(self, groups: list[dict[str, Any]], orchestrator: dict[str, Any] | None = None) -> None:
        self.description = {"InstanceGroups": groups, "Orchestrator": orchestrator or {"Slurm": {}}}

    def describe_cluster(self, **kwargs: Any) -> dict[str, Any]:
        return self.description


class StubS3:
    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.reads: list[tuple[str, str]] = []

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self.reads.append((Bucket, Key))
        if (Bucket, Key) not in self.objects:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "none"}}, "GetObject")
        return {"Body": io.BytesIO(json.dumps(self.objects[(Bucket, Key)]).encode())}


def group(name: str, count: int, node_type: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "InstanceGroupName": name,
        "CurrentCount": count,
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-lifecycle/config/", "OnCreate": "on_create.sh"},
    }
    if node_type:
        spec["SlurmConfig"] = {"NodeType": node_type}
    return spec


def test_roles_come_from_slurm_config_node_types() -> None:
    sagemaker = StubSageMaker(
        [group("head", 1, "Controller"), group("entry", 2, "Login"), group("gpus", 8, "Compute")]
    )
    s3 = StubS3({})
    topology = TopologyReader(sagemaker=sagemaker, s3=s3).cluster("c")  # type: ignore[arg-type]
    assert topology is not None
    assert (topology.node_count, topology.role("head"), topology.role("entry"), topology.role("gpus")) == (
        11,
        NodeRole.CONTROLLER,
        NodeRole.LOGIN,
        NodeRole.WORKER,
    )
    assert s3.reads == []  # SlurmConfig says it all


def test_roles_come_from_provisioning_parameters_next_to_the_lifecycle_scripts() -> None:
    sagemaker = StubSageMaker([group("my-head", 1), group("my-login", 1), group("workers", 4)])
    s3 = StubS3(
        {
            ("sagemaker-lifecycle", "config/provisioning_parameters.json"): {
                "controller_group": "my-head",
                "login_group": "my-login",
                "worker_groups": [{"instance_group_name": "workers", "partition_name": "dev"}],
            }
        }
    )
    reader = TopologyReader(sagemaker=sagemaker, s3=s3)  # type: ignore[arg-type]
    topology = reader.cluster("c")
    assert topology is not None
    assert (topology.role("my-head"), topology.role("my-login"), topology.role("workers")) == (
        NodeRole.CONTROLLER,
        NodeRole.LOGIN,
        NodeRole.WORKER,
    )
    reader.cluster("c")
    assert len(s3.reads) == 1  # read once per lifecycle prefix


def test_without_readable_parameters_the_workshop_names_decide() -> None:
    sagemaker = StubSageMaker([group("controller-machine", 1), group("login-group", 1), group("compute", 4)])
    topology = TopologyReader(sagemaker=sagemaker, s3=StubS3({})).cluster("c")  # type: ignore[arg-type]
    assert topology is not None
    assert (topology.controller_groups, topology.login_groups) == (
        frozenset({"controller-machine"}),
        frozenset({"login-group"}),
    )


def test_an_eks_cluster_has_no_controller() -> None:
    sagemaker = StubSageMaker([group("controller-ish", 2)], {"Eks": {"ClusterArn": "arn:aws:eks:..."}})
    topology = TopologyReader(sagemaker=sagemaker, s3=StubS3({})).cluster("c")  # type: ignore[arg-type]
    assert topology is not None
    assert topology.role("controller-ish") is NodeRole.WORKER


def test_node_recovery_and_deep_health_groups_come_from_describe_cluster() -> None:
    checked = {**group("gpus", 4), "OnStartDeepHealthChecks": ["InstanceStress"]}
    sagemaker = StubSageMaker([group("controller-machine", 1), checked])
    sagemaker.description["NodeRecovery"] = "Automatic"
    topology = TopologyReader(sagemaker=sagemaker, s3=StubS3({})).cluster("c")  # type: ignore[arg-type]
    assert topology is not None
    assert (topology.automatic_recovery, topology.deep_health_groups) == (True, frozenset({"gpus"}))
    assert topology.deep_health_checks("gpus")
    assert not topology.deep_health_checks("controller-machine")
    sagemaker.description["NodeRecovery"] = "None"
    manual = TopologyReader(sagemaker=sagemaker, s3=StubS3({})).cluster("c")  # type: ignore[arg-type]
    assert manual is not None
    assert manual.automatic_recovery is False


def test_a_cluster_described_without_node_recovery_is_awss_default_automatic() -> None:
    # validation lets a create leave NodeRecovery out (a warning): Autopilot must not repair beside HyperPod
    sagemaker = StubSageMaker([group("gpus", 4)])
    sagemaker.description.pop("NodeRecovery", None)
    topology = TopologyReader(sagemaker=sagemaker, s3=StubS3({})).cluster("c")  # type: ignore[arg-type]
    assert topology is not None
    assert topology.automatic_recovery is True
