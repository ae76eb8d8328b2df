"""Faults and EventBridge events of the HyperPod simulator, read back through a real rule and queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import (
    CLUSTER_EVENT,
    NODE_HEALTH,
    STATE_CHANGE,
    HyperPodSimulator,
    HyperPodTimings,
)

MINUTE = 60.0
DELIVERY = HyperPodTimings().event_delivery  # simulated seconds from a change to its event
Events = Callable[[], list[dict[str, Any]]]
Request = Callable[..., dict[str, Any]]


@pytest.fixture
def in_service(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> dict[str, Any]:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn, InstanceGroupNameContains="worker")
    return {"arn": arn, "workers": [n["InstanceId"] for n in nodes["ClusterNodeSummaries"]]}


def _deliver(clock: SandboxClock, simulator: HyperPodSimulator) -> None:
    """Let the events of what just happened reach EventBridge."""
    clock.advance(DELIVERY)
    simulator.tick()


def _of_type(events: list[dict[str, Any]], detail_type: str) -> list[dict[str, Any]]:
    return [e for e in events if e["detail-type"] == detail_type]


def test_state_change_events_follow_the_lifecycle(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())["ClusterArn"]
    hyperpod_sim.tick()
    assert hyperpod_events() == []  # an event reaches EventBridge after the call, a little later
    hyperpod_clock.advance(20 * MINUTE + DELIVERY)
    hyperpod_sim.tick()  # the background ticker's job: no API call needed for the event to appear

    changes = _of_type(hyperpod_events(), STATE_CHANGE)

    assert [e["detail"]["ClusterStatus"] for e in changes] == ["Creating", "InService"]
    event = changes[1]
    assert event["source"] == "aws.sagemaker"
    assert event["resources"] == [arn]
    assert event["region"] == "us-east-1"
    assert event["account"] == arn.split(":")[4]
    assert event["detail"]["ClusterArn"] == arn
    assert event["detail"]["InstanceGroups"][1]["CurrentCount"] == 2
    created = hyperpod_sagemaker.describe_cluster(ClusterName=arn)["CreationTime"]
    assert event["detail"]["CreationTime"] == int(created.timestamp() * 1000)  # epoch ms, as AWS sends
    assert event["detail"]["FailureMessage"] == ""


def test_node_unhealthy_emits_the_node_health_event(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    in_service: dict[str, Any],
) -> None:
    hyperpod_events()
    node = in_service["workers"][0]

    result = hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "ml-cluster", "node_id": node})
    _deliver(hyperpod_clock, hyperpod_sim)

    (event,) = _of_type(hyperpod_events(), NODE_HEALTH)
    assert event["resources"] == [in_service["arn"]]
    detail = event["detail"]
    assert (detail["ClusterName"], detail["ClusterArn"], detail["InstanceId"]) == (
        "ml-cluster",
        in_service["arn"],
        node,
    )
    assert detail["Tags"] == {"owner": "alice", "project": "llm"}
    summary = detail["HealthSummary"]
    assert summary["HealthStatus"] == "Unhealthy"
    assert summary["HealthStatusReason"] == (
        "HyperPod Health Monitoring Agent (HMA) has detected fault type NvidiaErrorTerminate "
        "on this node and is unhealthy."
    )
    # NodeRecovery None: HyperPod does nothing itself; the recommendation is the operator's to follow
    assert (summary["RepairAction"], summary["Recommendation"]) == ("None", "Please Replace the Faulty Node.")
    assert result["InstanceId"] == node
    assert result["AutoRecovery"] is False  # NodeRecovery None: the operator (autopilot) must act
    details = hyperpod_sagemaker.describe_cluster_node(ClusterName="ml-cluster", NodeId=node)["NodeDetails"]
    assert details["InstanceStatus"]["Status"] == "Running"  # HMA's verdict lives in Slurm / EKS


def test_reboot_heals_unless_the_fault_says_otherwise(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    in_service: dict[str, Any],
) -> None:
    healing, stubborn = in_service["workers"]
    for node in (healing, stubborn):
        hyperpod_sim.apply_fault(
            "node_unhealthy", {"cluster": "ml-cluster", "node_id": node, "fault_type": "NvidiaErrorReboot"}
        )
    hyperpod_sim.apply_fault("reboot_does_not_heal", {"cluster": "ml-cluster", "node_id": stubborn})
    hyperpod_events()

    hyperpod_sagemaker.batch_reboot_cluster_nodes(ClusterName="ml-cluster", NodeIds=[healing, stubborn])
    hyperpod_clock.advance(5 * MINUTE)
    _deliver(hyperpod_clock, hyperpod_sim)

    health = {
        e["detail"]["InstanceId"]: e["detail"]["HealthSummary"]
        for e in _of_type(hyperpod_events(), NODE_HEALTH)
    }
    assert health[healing] == {
        "HealthStatus": "Healthy",
        "HealthStatusReason": "",
        "RepairAction": "None",
        "Recommendation": "",
    }
    assert health[stubborn]["HealthStatus"] == "Unhealthy"
    # a reboot did not do it: escalate (HyperPod itself still does nothing, NodeRecovery is None)
    assert (health[stubborn]["RepairAction"], health[stubborn]["Recommendation"]) == (
        "None",
        "Please Replace the Faulty Node.",
    )


def test_node_recovery_automatic_replaces_the_node_itself(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(NodeRecovery="Automatic"))
    hyperpod_clock.advance(20 * MINUTE)

    result = hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "ml-cluster"})
    hyperpod_clock.advance(1 * MINUTE + 10 * MINUTE)

    assert result["AutoRecovery"] is True
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName="ml-cluster")["ClusterNodeSummaries"]
    assert result["InstanceId"] not in {n["InstanceId"] for n in nodes}
    assert len(nodes) == 3


def test_capacity_fault_fails_the_next_create(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> None:
    """Without NodeProvisioningMode Continuous a create is all or nothing."""
    hyperpod_sim.apply_fault("capacity", {"instance_type": "ml.p5.48xlarge"})

    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE)
    hyperpod_sim.tick()

    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "Failed"
    assert "InsufficientInstanceCapacity" in described["FailureMessage"]
    assert "sufficient ml.p5.48xlarge capacity" in described["FailureMessage"]
    events = hyperpod_events()
    assert [e["detail"]["ClusterStatus"] for e in _of_type(events, STATE_CHANGE)] == ["Creating", "Failed"]
    assert _of_type(events, CLUSTER_EVENT) == []  # AWS has cluster events for Continuous clusters only
    assert hyperpod_sim.running_instances() == []
    # the fault was for one call: the next cluster comes up
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request("second"))
    hyperpod_clock.advance(20 * MINUTE)
    assert hyperpod_sagemaker.describe_cluster(ClusterName="second")["ClusterStatus"] == "InService"


def _continuous_eks_request(request: Request, **overrides: Any) -> dict[str, Any]:
    built = request(
        NodeProvisioningMode="Continuous",
        Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}},
        **overrides,
    )
    for group in built["InstanceGroups"]:
        group.pop("SlurmConfig")
    return built


def _instance_failures(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["detail"]["EventDetails"]
        for e in _of_type(events, CLUSTER_EVENT)
        if e["detail"]["EventDetails"]["ResourceType"] == "Instance"
        and e["detail"]["EventDetails"]["EventLevel"] == "Error"
    ]


def _counts(described: dict[str, Any]) -> dict[str, tuple[int, int]]:
    groups = described["InstanceGroups"]
    return {g["InstanceGroupName"]: (g["CurrentCount"], g["TargetCount"]) for g in groups}


def test_continuous_create_is_in_service_with_partial_capacity_and_retries_in_the_background(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> None:
    """AWS: InService once cluster-level resources are ready, instances arrive as capacity allows, failed
    launches are retried in the background and reported as cluster events (never a Failed cluster)."""
    # two launch rounds find one p5 each: t0 launches 3 (1 gets capacity), t13 the 2 missing (1 gets it)
    hyperpod_sim.apply_fault("capacity", {"instance_type": "ml.p5.48xlarge", "times": 2, "available": 1})
    request = _continuous_eks_request(hyperpod_cluster_request, workers=3)
    arn = hyperpod_sagemaker.create_cluster(**request)["ClusterArn"]

    hyperpod_clock.advance(20 * MINUTE + DELIVERY)
    hyperpod_sim.tick()
    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "InService"
    assert "FailureMessage" not in described
    assert _counts(described) == {"controller-machine": (1, 1), "worker-group-1": (1, 3)}
    events = hyperpod_events()
    assert [e["detail"]["ClusterStatus"] for e in _of_type(events, STATE_CHANGE)] == ["Creating", "InService"]
    failures = _instance_failures(events)
    assert len(failures) == 2  # the first round's two launches without capacity (t8)
    assert {(f["InstanceGroupName"], f["Description"]) for f in failures} == {
        ("worker-group-1", "Instance creation in Cluster ml-cluster and InstanceGroup worker-group-1 failed")
    }
    assert failures[0]["EventDetails"]["EventMetadata"]["Instance"]["FailureMessage"] == (
        "We currently do not have sufficient capacity to launch new ml.p5.48xlarge instances. "
        "Please try again."
    )
    assert isinstance(failures[0]["EventTime"], int)  # epoch milliseconds, as EventBridge carries it
    billed = {i.instance_group for i in hyperpod_sim.running_instances()}
    assert billed == {"controller-machine", "worker-group-1"}
    assert len(hyperpod_sim.running_instances()) == 2

    # t21 the second round's failed launch, t25 its other instance up, t26 a third round, t38 all up
    hyperpod_clock.advance(18 * MINUTE)
    hyperpod_sim.tick()
    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert (described["ClusterStatus"], _counts(described)["worker-group-1"]) == ("InService", (3, 3))
    later = hyperpod_events()  # what reached the queue since the first read
    failures += _instance_failures(later)
    assert len(failures) == 3  # the second round's launch without capacity too (t21)
    assert _of_type(later, STATE_CHANGE) == []  # the cluster stayed InService while the instances came
    listed = hyperpod_sagemaker.list_cluster_events(ClusterName=arn, ResourceType="Instance", MaxResults=100)
    errors = [e["EventId"] for e in listed["Events"] if e["EventLevel"] == "Error"]
    assert sorted(errors) == sorted(f["EventId"] for f in failures)
    nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]
    assert [n["InstanceStatus"]["Status"] for n in nodes] == ["Running"] * 4


def test_continuous_create_without_any_worker_capacity_keeps_retrying_until_it_comes(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sim.apply_fault("capacity", {"instance_type": "ml.p5.48xlarge", "times": 100})
    arn = hyperpod_sagemaker.create_cluster(**_continuous_eks_request(hyperpod_cluster_request))["ClusterArn"]

    hyperpod_clock.advance(3 * 60 * MINUTE)
    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "InService"
    assert _counts(described)["worker-group-1"] == (0, 2)
    rounds = hyperpod_sagemaker.list_cluster_events(ClusterName=arn, ResourceType="Instance", MaxResults=100)
    assert len([e for e in rounds["Events"] if e["EventLevel"] == "Error"]) > 2 * 10  # every 13 minutes

    hyperpod_sim.apply_fault("clear", {})  # capacity is back: the next background round gets it
    hyperpod_clock.advance(30 * MINUTE)
    assert _counts(hyperpod_sagemaker.describe_cluster(ClusterName=arn))["worker-group-1"] == (2, 2)


def test_continuous_scaling_stays_in_service_and_retries_launches_without_capacity(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> None:
    """botocore: with Continuous, "Your clusters and instance groups remain InService while scaling"."""
    request = _continuous_eks_request(hyperpod_cluster_request)
    arn = hyperpod_sagemaker.create_cluster(**request)["ClusterArn"]
    hyperpod_clock.advance(20 * MINUTE + DELIVERY)
    hyperpod_sim.tick()
    hyperpod_events()  # the create's
    hyperpod_sim.apply_fault("capacity", {"operation": "UpdateCluster"})  # the first round finds none
    workers = request["InstanceGroups"][1]

    hyperpod_sagemaker.update_cluster(ClusterName=arn, InstanceGroups=[{**workers, "InstanceCount": 4}])
    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "InService"
    assert described["InstanceGroups"][1]["Status"] == "InService"
    assert _counts(described)["worker-group-1"] == (2, 4)
    hyperpod_clock.advance(8 * MINUTE + DELIVERY)
    hyperpod_sim.tick()
    events = hyperpod_events()
    assert len(_instance_failures(events)) == 2
    assert _of_type(events, STATE_CHANGE) == []
    hyperpod_clock.advance(17 * MINUTE)  # the retry at +13 minutes, up 12 minutes later
    assert _counts(hyperpod_sagemaker.describe_cluster(ClusterName=arn))["worker-group-1"] == (4, 4)

    hyperpod_sagemaker.update_cluster(ClusterName=arn, InstanceGroups=[{**workers, "InstanceCount": 1}])
    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"
    hyperpod_clock.advance(3 * MINUTE)
    assert _counts(hyperpod_sagemaker.describe_cluster(ClusterName=arn))["worker-group-1"] == (1, 1)
    assert len(hyperpod_sagemaker.list_cluster_nodes(ClusterName=arn)["ClusterNodeSummaries"]) == 2

    hyperpod_sagemaker.update_cluster(ClusterName=arn, InstanceGroupsToDelete=["controller-machine"])
    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"
    hyperpod_clock.advance(3 * MINUTE)
    assert _counts(hyperpod_sagemaker.describe_cluster(ClusterName=arn)) == {"worker-group-1": (1, 1)}


def test_continuous_slurm_cluster_waits_for_its_controller(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    """AWS's Slurm page: InService after at least one controller (and login) node is provisioned."""
    hyperpod_sim.apply_fault("capacity", {"instance_type": "ml.m5.12xlarge"})
    request = hyperpod_cluster_request(NodeProvisioningMode="Continuous")
    arn = hyperpod_sagemaker.create_cluster(**request)["ClusterArn"]

    hyperpod_clock.advance(20 * MINUTE)
    described = hyperpod_sagemaker.describe_cluster(ClusterName=arn)
    assert described["ClusterStatus"] == "Creating"
    assert _counts(described) == {"controller-machine": (0, 1), "worker-group-1": (2, 2)}
    hyperpod_clock.advance(5 * MINUTE)  # the retry at t13 got a controller, up at t25
    assert hyperpod_sagemaker.describe_cluster(ClusterName=arn)["ClusterStatus"] == "InService"


def test_capacity_fault_on_scale_up_rolls_back(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
    in_service: dict[str, Any],
) -> None:
    hyperpod_sim.apply_fault("capacity", {"operation": "UpdateCluster"})
    workers = hyperpod_cluster_request()["InstanceGroups"][1]

    hyperpod_sagemaker.update_cluster(
        ClusterName="ml-cluster", InstanceGroups=[{**workers, "InstanceCount": 8}]
    )
    hyperpod_clock.advance(8 * MINUTE)
    assert hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")["ClusterStatus"] == "RollingBack"
    hyperpod_clock.advance(3 * MINUTE)

    described = hyperpod_sagemaker.describe_cluster(ClusterName="ml-cluster")
    assert described["ClusterStatus"] == "InService"
    assert (
        described["InstanceGroups"][1]["CurrentCount"],
        described["InstanceGroups"][1]["TargetCount"],
    ) == (2, 2)
    assert "InsufficientInstanceCapacity" in described["FailureMessage"]


def test_apply_fault_rejects_unknown_faults_and_parameters(
    hyperpod_sim: HyperPodSimulator, in_service: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        hyperpod_sim.apply_fault("meteor", {})
    with pytest.raises(ValueError, match="bad parameters"):
        hyperpod_sim.apply_fault("capacity", {"colour": "red"})
    with pytest.raises(ValueError, match="unknown fault_type"):
        hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "ml-cluster", "fault_type": "Gremlins"})
    with pytest.raises(ValueError, match="not found"):
        hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "missing"})
    with pytest.raises(ValueError, match="unknown fault"):  # AWS-call faults are sandbox.emulator.aws_calls'
        hyperpod_sim.apply_fault("throttling", {"rate": 0.5})


def test_running_instances_are_the_billable_nodes_with_cluster_tags(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    arn = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(workers=2))["ClusterArn"]
    assert hyperpod_sim.running_instances() == []  # Pending instances are not billed yet

    hyperpod_clock.advance(20 * MINUTE)
    running = hyperpod_sim.running_instances()

    assert len(running) == 3
    assert {r.instance_type for r in running} == {"ml.m5.12xlarge", "ml.p5.48xlarge"}
    assert all(r.cluster_arn == arn and r.cluster_name == "ml-cluster" for r in running)
    assert running[0].tags == {"owner": "alice", "project": "llm"}
    hyperpod_sagemaker.delete_cluster(ClusterName="ml-cluster")
    assert hyperpod_sim.running_instances() == []
