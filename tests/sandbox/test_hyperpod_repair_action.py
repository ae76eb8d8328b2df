"""What a Node Health event says as RepairAction, chosen apart from who repairs (issue 19 item 12):
AWS's only Node Health sample says "None" beside "Please Replace the Faulty Node." and AWS does not
define the field, so the simulator sends either reading and the control plane must decide who repairs
from the cluster's NodeRecovery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sandbox.emulator.clock import SandboxClock
from sandbox.services.hyperpod import NODE_HEALTH, HyperPodSimulator, HyperPodTimings

MINUTE = 60.0
Events = Callable[[], list[dict[str, Any]]]
Request = Callable[..., dict[str, Any]]


def workers(sagemaker: Any) -> list[str]:
    listed = sagemaker.list_cluster_nodes(ClusterName="ml-cluster", InstanceGroupNameContains="worker")
    return [n["InstanceId"] for n in listed["ClusterNodeSummaries"]]


@pytest.mark.parametrize(
    ("node_recovery", "repair_action", "replaced"),
    [("Automatic", "None", True), ("None", "Replace", False)],
)
def test_repair_action_sets_what_the_event_says_not_who_repairs(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_events: Events,
    hyperpod_cluster_request: Request,
    node_recovery: str,
    repair_action: str,
    replaced: bool,
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(NodeRecovery=node_recovery))
    hyperpod_clock.advance(20 * MINUTE)
    hyperpod_events()

    fault = {"cluster": "ml-cluster", "repair_action": repair_action}
    result = hyperpod_sim.apply_fault("node_unhealthy", fault)
    hyperpod_clock.advance(HyperPodTimings().event_delivery)
    hyperpod_sim.tick()

    [event] = [e for e in hyperpod_events() if e["detail-type"] == NODE_HEALTH]
    assert event["detail"]["HealthSummary"]["RepairAction"] == result["RepairAction"] == repair_action
    assert result["AutoRecovery"] is replaced
    hyperpod_clock.advance(1 * MINUTE + 10 * MINUTE)  # HyperPod's own repair: detection, then a replace
    assert (result["InstanceId"] not in workers(hyperpod_sagemaker)) is replaced


def test_a_seeded_share_of_automatic_faults_says_repair_action_none(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request(NodeRecovery="Automatic", workers=8))
    hyperpod_clock.advance(20 * MINUTE)
    hyperpod_sim.repair_action_none = 0.5

    said = [
        hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "ml-cluster", "node_id": node})
        for node in workers(hyperpod_sagemaker)
    ]

    assert {s["RepairAction"] for s in said} == {"None", "Replace"}  # seed 7: some of each
    assert all(s["AutoRecovery"] for s in said)  # HyperPod repairs every one of them
    # The draws have their own seeded stream (another seed option does not move them): the same share.
    replay = HyperPodSimulator(hyperpod_clock, seed=7, duplicate_events=0.3, repair_action_none=0.5)
    assert [s["RepairAction"] == "None" for s in said] == [
        replay._repair_actions.random() < 0.5 for _ in said
    ]
    # and spawned simulators (another region) keep the option
    assert hyperpod_sim.spawn("123456789012", "eu-west-1").repair_action_none == 0.5


def test_repair_action_and_its_share_are_checked(
    hyperpod_sagemaker: Any,
    hyperpod_sim: HyperPodSimulator,
    hyperpod_clock: SandboxClock,
    hyperpod_cluster_request: Request,
) -> None:
    hyperpod_sagemaker.create_cluster(**hyperpod_cluster_request())
    hyperpod_clock.advance(20 * MINUTE)
    with pytest.raises(ValueError, match="repair_action must be one of None, Reboot, Replace"):
        hyperpod_sim.apply_fault("node_unhealthy", {"cluster": "ml-cluster", "repair_action": "Maybe"})
    with pytest.raises(ValueError, match="repair_action_none"):
        HyperPodSimulator(hyperpod_clock, repair_action_none=1.5)
