"""The HyperPod simulator's EventBridge events against AWS's own samples (events/hyperpod/).

Every event a lifecycle emits is compared with the sample of its detail-type, member by member and
JSON type by type. Members the sample lacks must be members of the botocore model's shape for that
object (DescribeCluster for a state change, ClusterEventDetail for a cluster event) with the JSON type
the model gives them; members the sample has may be missing only where listed in ``OPTIONAL``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.model import ListShape, MapShape, Shape, StructureShape
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import (
    CLUSTER_EVENT,
    NODE_HEALTH,
    STATE_CHANGE,
    HyperPodSimulator,
    HyperPodTimings,
)
from sandbox.services.hyperpod.validation import sagemaker_model

SAMPLES = Path(__file__).resolve().parents[2] / "events" / "hyperpod"
SAMPLE_FILES = {
    STATE_CHANGE: "cluster_state_change.json",
    NODE_HEALTH: "cluster_node_health_event.json",
    CLUSTER_EVENT: "cluster_event.json",
}
# Sample members AWS sends only when the cluster uses them (and why the sandbox may leave them out).
OPTIONAL = {
    STATE_CHANGE: {
        # training plans are not simulated
        "detail.InstanceGroups[].TrainingPlanArn",
        "detail.InstanceGroups[].TrainingPlanStatus",
        # echoed from the request when it has them (DescribeCluster's shape: not required)
        "detail.InstanceGroups[].InstanceStorageConfigs",
        "detail.InstanceGroups[].OnStartDeepHealthChecks",
        "detail.InstanceGroups[].OverrideVpcConfig",
        "detail.Orchestrator",
    },
    NODE_HEALTH: set(),
    CLUSTER_EVENT: {
        # the cluster events reference: present for InstanceGroup / Instance events; metadata optional
        "detail.EventDetails.InstanceGroupName",
        "detail.EventDetails.InstanceId",
        "detail.EventDetails.EventDetails",
        # the sample's metadata is a lifecycle script's; a capacity failure's carries other members
        "detail.EventDetails.EventDetails.EventMetadata.Instance.LcsExecutionState",
    },
}
MINUTE = 60.0
DELIVERY = HyperPodTimings().event_delivery
Events = Callable[[], list[dict[str, Any]]]
Request = Callable[..., dict[str, Any]]

_MODEL_TYPES = {
    "structure": "object",
    "map": "object",
    "list": "array",
    "string": "string",
    "integer": "number",
    "long": "number",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "timestamp": "number",  # HyperPod's events carry times as epoch milliseconds
}


def _sample(detail_type: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SAMPLES / SAMPLE_FILES[detail_type]).read_text())
    return loaded


def _model_anchors(detail_type: str) -> dict[str, Shape]:
    """Where the botocore model describes what a sample does not show."""
    shapes = sagemaker_model().shape_for
    if detail_type == STATE_CHANGE:
        return {"detail": shapes("DescribeClusterResponse")}
    if detail_type == CLUSTER_EVENT:
        return {"detail.EventDetails": shapes("ClusterEventDetail")}
    return {}


def _json_type(value: Any) -> str:
    for python_type, name in ((bool, "boolean"), (int | float, "number"), (str, "string")):
        if isinstance(value, python_type):
            return name
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def _member(shape: Shape | None, name: str) -> Shape | None:
    return shape.members.get(name) if isinstance(shape, StructureShape) else None


def _against_model(value: Any, shape: Shape, path: str) -> list[str]:
    wanted = _MODEL_TYPES[shape.type_name]
    if _json_type(value) != wanted:
        return [f"{path}: a {_json_type(value)}, the model says {wanted}"]
    found: list[str] = []
    if isinstance(shape, StructureShape):
        for key, item in value.items():
            member = _member(shape, key)
            found += (
                [f"{path}.{key}: not in the model"]
                if member is None
                else _against_model(item, member, f"{path}.{key}")
            )
    elif isinstance(shape, ListShape):
        for item in value:
            found += _against_model(item, shape.member, f"{path}[]")
    elif isinstance(shape, MapShape):
        for key, item in value.items():
            found += _against_model(item, shape.value, f"{path}.{key}")
    return found


def differences(
    sample: Any, emitted: Any, path: str, shape: Shape | None, anchors: dict[str, Shape], optional: set[str]
) -> list[str]:
    """How ``emitted`` differs from AWS's ``sample`` (members, JSON types), as readable lines."""
    shape = anchors.get(path, shape)
    if _json_type(sample) != _json_type(emitted):
        return [f"{path}: a {_json_type(emitted)}, AWS sends a {_json_type(sample)}"]
    found: list[str] = []
    if isinstance(sample, dict) and path == "detail.Tags":  # the cluster's tags: a string map
        found += [f"{path}.{k}: not a string" for k, v in emitted.items() if not isinstance(v, str)]
    elif isinstance(sample, dict):
        for key, value in sample.items():
            where = f"{path}.{key}".lstrip(".")
            if key in emitted:
                found += differences(value, emitted[key], where, _member(shape, key), anchors, optional)
            elif where not in optional:
                found.append(f"{where}: missing (AWS's sample has it)")
        for key in emitted.keys() - sample.keys():
            member = _member(shape, key)
            where = f"{path}.{key}".lstrip(".")
            found += (
                [f"{where}: neither in AWS's sample nor in the model"]
                if member is None
                else _against_model(emitted[key], member, where)
            )
    elif isinstance(sample, list) and sample:
        item_shape = shape.member if isinstance(shape, ListShape) else None
        for item in emitted:
            found += differences(sample[0], item, f"{path}[]", item_shape, anchors, optional)
    return found


def compare_with_sample(event: dict[str, Any]) -> list[str]:
    detail_type = event["detail-type"]
    return differences(
        _sample(detail_type), event, "", None, _model_anchors(detail_type), OPTIONAL[detail_type]
    )


# -- the comparison itself can fail ----------------------------------------------------------------
def test_the_comparison_names_what_differs() -> None:
    sample = _sample(STATE_CHANGE)
    emitted = json.loads(json.dumps(sample))
    emitted["detail"]["CreationTime"] = "2025-04-28T16:40:47.412Z"
    del emitted["detail"]["FailureMessage"]
    emitted["detail"]["Invented"] = 1
    emitted["detail"]["NodeProvisioningMode"] = "Continuous"  # in the model: allowed

    assert compare_with_sample(emitted) == [
        "detail.CreationTime: a string, AWS sends a number",
        "detail.FailureMessage: missing (AWS's sample has it)",
        "detail.Invented: neither in AWS's sample nor in the model",
    ]
    assert compare_with_sample(_sample(NODE_HEALTH)) == []
    assert compare_with_sample(_sample(CLUSTER_EVENT)) == []


# -- the simulator's events ------------------------------------------------------------------------
def _full_request(request: Request, name: str, **overrides: Any) -> dict[str, Any]:
    """A Continuous EKS cluster whose worker group uses every member of AWS's state change sample."""
    built = request(
        name, Orchestrator={"Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/eks"}}
    )
    for group in built["InstanceGroups"]:
        group.pop("SlurmConfig")
    workers = built["InstanceGroups"][1]
    workers["InstanceStorageConfigs"] = [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
    workers["OnStartDeepHealthChecks"] = ["InstanceStress", "InstanceConnectivity"]
    workers["OverrideVpcConfig"] = {
        "SecurityGroupIds": ["sg-0fedcba9876543210"],
        "Subnets": ["subnet-0fedcba98765"],
    }
    built.update(NodeProvisioningMode="Continuous", NodeRecovery="Automatic", **overrides)
    return built


@pytest.fixture
def lifecycle_events(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> list[dict[str, Any]]:
    """Create, deep health checks, faults healed by HyperPod itself, a failed scale-up, a failed create,
    a NodeRecovery None cluster's fault, deletes: every kind of event the simulator sends."""
    sagemaker, simulator = hyperpod_sagemaker, hyperpod_sim
    clock, request = hyperpod_clock, hyperpod_cluster_request
    sagemaker.create_cluster(**_full_request(request, "full"))
    sagemaker.create_cluster(**request("plain", workers=1))  # NodeRecovery None, not Continuous
    checks = HyperPodTimings().deep_health_check
    clock.advance(20 * MINUTE + checks)  # created, the workers' deep health checks passed
    nodes = sagemaker.list_cluster_nodes(ClusterName="full", InstanceGroupNameContains="worker")
    rebooted, replaced = (n["InstanceId"] for n in nodes["ClusterNodeSummaries"])
    simulator.apply_fault(
        "node_unhealthy", {"cluster": "full", "node_id": rebooted, "fault_type": "NvidiaErrorReboot"}
    )
    simulator.apply_fault("node_unhealthy", {"cluster": "full", "node_id": replaced})
    simulator.apply_fault("node_unhealthy", {"cluster": "plain"})
    clock.advance(30 * MINUTE + checks)  # HyperPod's replacement is checked too
    simulator.apply_fault("capacity", {"operation": "UpdateCluster"})
    workers = _full_request(request, "full")["InstanceGroups"][1]
    sagemaker.update_cluster(ClusterName="full", InstanceGroups=[{**workers, "InstanceCount": 4}])
    clock.advance(15 * MINUTE)
    simulator.apply_fault("capacity", {})
    sagemaker.create_cluster(**_full_request(request, "no-capacity"))
    clock.advance(10 * MINUTE)
    for name in ("full", "plain", "no-capacity"):
        sagemaker.delete_cluster(ClusterName=name)
    clock.advance(10 * MINUTE)
    simulator.tick()
    return hyperpod_events()


def test_every_event_matches_aws_samples_member_by_member(lifecycle_events: list[dict[str, Any]]) -> None:
    events = lifecycle_events

    assert {e["detail-type"] for e in events} == set(SAMPLE_FILES)
    assert len(events) > 30
    mismatches = {f"{e['detail-type']}{line}" for e in events for line in compare_with_sample(e)}
    assert mismatches == set()
    capacity = [
        e["detail"]["EventDetails"]
        for e in events
        if e["detail-type"] == CLUSTER_EVENT and e["detail"]["EventDetails"]["EventLevel"] == "Error"
    ]
    assert {c["ResourceType"] for c in capacity if "EventMetadata" in c.get("EventDetails", {})} == {
        "Instance"
    }


def test_repair_action_is_what_hyperpod_itself_will_do(lifecycle_events: list[dict[str, Any]]) -> None:
    unhealthy = {
        (e["detail"]["ClusterName"], e["detail"]["HealthSummary"]["Recommendation"]): e["detail"][
            "HealthSummary"
        ]
        for e in lifecycle_events
        if e["detail-type"] == NODE_HEALTH and e["detail"]["HealthSummary"]["HealthStatus"] == "Unhealthy"
    }

    assert {key: summary["RepairAction"] for key, summary in unhealthy.items()} == {
        ("full", "Please Reboot the Faulty Node."): "Reboot",  # NodeRecovery Automatic
        ("full", "Please Replace the Faulty Node."): "Replace",
        ("plain", "Please Replace the Faulty Node."): "None",  # NodeRecovery None: the operator acts
    }


def test_cluster_events_only_for_continuous_clusters_newest_first(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
) -> None:
    plain = hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request("plain"))["ClusterArn"]
    hyperpod_sagemaker.create_cluster(**_full_request(hyperpod_cluster_request, "full"))
    hyperpod_clock.advance(20 * MINUTE + DELIVERY)
    hyperpod_sim.tick()

    with_cluster_events = {e["resources"][0] for e in hyperpod_events() if e["detail-type"] == CLUSTER_EVENT}
    assert len(with_cluster_events) == 1
    assert plain not in with_cluster_events
    requests: list[tuple[str, dict[str, str]]] = [
        ("list_cluster_events", {}),
        ("describe_cluster_event", {"EventId": "a307fae0-6937-40f9-af2f-16eb873d340a"}),
    ]
    for method, params in requests:
        with pytest.raises(ClientError) as error:
            getattr(hyperpod_sagemaker, method)(ClusterName="plain", **params)
        assert error.value.response["Error"]["Code"] == "ValidationException"  # unverified: see docs
    newest_first = hyperpod_sagemaker.list_cluster_events(ClusterName="full", MaxResults=100)["Events"]
    times = [e["EventTime"] for e in newest_first]
    assert times == sorted(times, reverse=True)
    assert times[0] > times[-1]
    oldest_first = hyperpod_sagemaker.list_cluster_events(
        ClusterName="full", SortOrder="Ascending", MaxResults=100
    )
    assert [e["EventTime"] for e in oldest_first["Events"]] == sorted(times)
    started = newest_first[-1]
    assert (started["ResourceType"], started["Description"]) == (
        "Cluster",
        "Cluster full creation started successfully",
    )


def test_deep_health_checks_come_before_running_and_in_service(
    hyperpod_sagemaker: Any, hyperpod_clock: SandboxClock, hyperpod_cluster_request: Request
) -> None:
    request = _full_request(hyperpod_cluster_request, "full")
    del request["NodeProvisioningMode"]  # a Continuous cluster is InService before its instances (below)
    hyperpod_sagemaker.create_cluster(**request)
    hyperpod_sagemaker.create_cluster(**_full_request(hyperpod_cluster_request, "continuous"))
    hyperpod_clock.advance(20 * MINUTE)
    assert hyperpod_sagemaker.describe_cluster(ClusterName="continuous")["ClusterStatus"] == "InService"

    def statuses() -> dict[str, set[str]]:
        nodes = hyperpod_sagemaker.list_cluster_nodes(ClusterName="full")["ClusterNodeSummaries"]
        found: dict[str, set[str]] = {}
        for node in nodes:
            found.setdefault(node["InstanceGroupName"], set()).add(node["InstanceStatus"]["Status"])
        return found

    assert statuses() == {"controller-machine": {"Running"}, "worker-group-1": {"DeepHealthCheckInProgress"}}
    assert hyperpod_sagemaker.describe_cluster(ClusterName="full")["ClusterStatus"] == "Creating"
    hyperpod_clock.advance(HyperPodTimings().deep_health_check)
    assert statuses() == {"controller-machine": {"Running"}, "worker-group-1": {"Running"}}
    assert hyperpod_sagemaker.describe_cluster(ClusterName="full")["ClusterStatus"] == "InService"


@pytest.mark.parametrize(("rate", "copies"), [(0.0, {1}), (1.0, {2}), (0.5, {1, 2})])
def test_duplicate_events_repeat_a_seeded_share(
    hyperpod_aws_env: None,
    capture_events: Callable[[str, dict[str, Any]], Events],
    hyperpod_cluster_request: Request,
    rate: float,
    copies: set[int],
) -> None:
    with mock_aws():
        clock = SandboxClock(speed=0)
        with HyperPodSimulator(clock, seed=11, duplicate_events=rate) as simulator:
            drain = capture_events("duplicates", {"source": ["aws.sagemaker"]})
            sagemaker = boto3.client("sagemaker", region_name="us-east-1")
            for index in range(6):
                sagemaker.create_cluster(**hyperpod_cluster_request(f"c{index}"))
            clock.advance(20 * MINUTE + 2 * DELIVERY)
            simulator.tick()
            seen: dict[str, int] = {}
            for event in drain():
                key = json.dumps([event["detail-type"], event["detail"], event["time"]], sort_keys=True)
                seen[key] = seen.get(key, 0) + 1

    assert len(seen) == 12  # Creating and InService of each cluster
    assert set(seen.values()) == copies
