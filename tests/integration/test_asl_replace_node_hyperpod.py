"""The ReplaceNode workflow on moto's Step Functions executor, against the HyperPod simulator: HyperPod's own
repairs, reboot-only nodes, the lease and paused clusters (the harness: replace_node_support.py)."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.dal.healing import healing_key
from autopilot.logic.healing.start_repair import repair_deadlines
from autopilot.models.records import (
    NodeAction,
    RepairTrigger,
)
from autopilot.settings import HealingSettings
from autopilot.workflows.inputs import RepairDeadlines

from tests.integration.replace_node_support import (
    CLUSTER,
    WORKERS,
    assert_released,
    fault,
    healing_table,
    item,
    make_cluster,
    node_status,
    operation_of,
    run,
    start_repair,
)
from tests.integration.workflows import (
    entered,
    history,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def test_hyperpods_own_repair_is_observed_without_a_call(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    arn = start_repair(stack, node, NodeAction.OBSERVE, fault(stack, node, auto_recover=True))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert not {"Reboot Node", "Replace Node"} & set(states)  # never two actors on one node
    assert states.count("Await Node") == 1
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("observe", "succeeded")]


def test_a_node_hyperpod_replaces_itself_is_followed_to_its_successor(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    found = fault(stack, node, "NvidiaErrorTerminate", auto_recover=True)  # HyperPod replaces it
    arn = start_repair(stack, node, NodeAction.OBSERVE, found)

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    states = entered(history(stack, arn))
    assert not {"Reboot Node", "Replace Node"} & set(states)
    assert "Find Successor" in states
    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert successor is not None
    assert successor != node
    assert [(a.action.value, a.result.value, a.successor_node_id) for a in operation.actions or []] == [
        ("observe", "succeeded", successor)
    ]
    assert node_status(stack, successor) == "Running"


def test_hyperpods_repair_that_stalls_is_escalated_to_a_replace(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic")[WORKERS][0]
    # HyperPod says it repairs the node, and never does
    arn = start_repair(stack, node, NodeAction.OBSERVE, fault(stack, node, "NvidiaErrorTerminate"))

    [execution] = run(stack, arn)

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [
        ("observe", "timed-out"),
        ("replace", "succeeded"),
    ]
    assert operation.successor_node_id is not None
    assert node_status(stack, operation.successor_node_id) == "Running"


def test_a_hyperpod_replacement_in_deep_health_checks_is_not_replaced_a_second_time(make_stack: Any) -> None:
    # The deadlines ClusterEventsFunction gives a node of a deep-health group (the template's defaults):
    # HyperPod's replacement spends ~2 h in checks, past HyperPodRepairDeadlineMinutes (90) alone, which
    # escalated a repair working as designed to a second replace.
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack, node_recovery="Automatic", deep_health_checks=True)[WORKERS][0]
    settings = HealingSettings.from_environ(stack.environment("ClusterEventsFunction"))
    deadlines = repair_deadlines(settings, deep_health_checks=True)
    checks = stack.hyperpod.timings.deep_health_check
    assert settings.hyperpod_repair_deadline_minutes * 60 < checks < deadlines.hyperpod_seconds
    found = fault(stack, node, "NvidiaErrorTerminate", auto_recover=True)  # HyperPod replaces it

    # 10-minute rounds: the replacement's ~2 h of checks in a dozen, not 120
    [execution] = run(
        stack, start_repair(stack, node, NodeAction.OBSERVE, found, deadlines=deadlines), step=600.0
    )

    assert execution["status"] == "SUCCEEDED"
    operation = operation_of(execution)
    successor = operation.successor_node_id
    assert [(a.action.value, a.result.value, a.successor_node_id) for a in operation.actions or []] == [
        ("observe", "succeeded", successor)
    ]
    assert successor is not None
    assert node_status(stack, successor) == "Running"
    assert stack.hyperpod.node_repairs[(CLUSTER, node, "replace")] == 1  # HyperPod's own, only


def test_a_node_that_may_only_be_rebooted_is_not_replaced(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    login = make_cluster(stack)["login-group"][0]
    found = fault(stack, login)
    stack.hyperpod.fault_reboot_does_not_heal(CLUSTER, login)
    arn = start_repair(stack, login, NodeAction.REBOOT, found, allow_replace=False)

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.RepairTimedOut"
    assert [(a.action.value, a.result.value) for a in operation.actions or []] == [("reboot", "timed-out")]
    assert "Replace Node" not in entered(history(stack, arn))
    assert_released(stack, execution, login)


def test_the_lease_caps_concurrent_repairs(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, MaxConcurrentRepairs=2)
    workers = make_cluster(stack)[WORKERS]
    found = {node: fault(stack, node) for node in workers}
    arns = [start_repair(stack, node, NodeAction.REBOOT, found[node]) for node in workers]
    holding: list[int] = []

    def count_holders() -> None:
        holders = item(stack, healing_key(CLUSTER)).get("leaseHolders", {}).get("SS", [])
        holding.append(len(holders))

    executions = run(stack, *arns, each_round=count_holders)

    assert [e["status"] for e in executions] == ["SUCCEEDED"] * len(workers)
    assert max(holding) == 2  # the cap held, and was used
    waited = [entered(history(stack, arn)).count("Wait For Lease") for arn in arns]
    assert sum(1 for w in waited if w) >= 2  # two repairs waited for a slot
    assert all(node_status(stack, node) == "Running" for node in workers)
    for execution, node in zip(executions, workers, strict=True):
        assert_released(stack, execution, node)


def test_a_paused_cluster_starts_no_repair_until_the_deadline(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0)
    node = make_cluster(stack)[WORKERS][0]
    found = fault(stack, node)
    now = stack.clock.now()
    assert healing_table(stack).pause(
        CLUSTER, by="arn:aws:iam::123456789012:user/ops", reason="test", now=now
    )
    arn = start_repair(
        stack,
        node,
        NodeAction.REBOOT,
        found,
        # A repair waits for its slot until 23 h minus its action deadlines (at least replaceSeconds):
        # here 600 s, so the test steps ten minutes, not twenty hours.
        deadlines=RepairDeadlines(reboot_seconds=41000, replace_seconds=600, hyperpod_seconds=41000),
    )

    [execution] = run(stack, arn)

    assert execution["status"] == "FAILED"
    operation = operation_of(execution)
    assert operation.error is not None
    assert operation.error.error == "Autopilot.NoRepairSlot"
    assert "Reboot Node" not in entered(history(stack, arn))
    assert_released(stack, execution, node)


def test_an_operators_repair_on_a_paused_cluster_takes_a_slot_and_completes(make_stack: Any) -> None:
    # the pause holds automatic repairs only: POST .../reboot (trigger api) is an operator's explicit request
    stack = make_stack(clock_speed=0, MaxConcurrentRepairs=1)
    node, other = make_cluster(stack)[WORKERS][:2]
    found = fault(stack, node)
    now = stack.clock.now()
    assert healing_table(stack).pause(
        CLUSTER, by="arn:aws:iam::123456789012:user/ops", reason="test", now=now
    )
    arn = start_repair(stack, node, NodeAction.REBOOT, found, trigger=RepairTrigger.API)
    automatic = start_repair(
        stack,
        other,
        NodeAction.REBOOT,
        fault(stack, other),
        deadlines=RepairDeadlines(reboot_seconds=41000, replace_seconds=600, hyperpod_seconds=41000),
    )

    operator, held = run(stack, arn, automatic)

    assert operator["status"] == "SUCCEEDED"
    assert entered(history(stack, arn)).count("Reboot Node") == 1
    assert node_status(stack, node) == "Running"
    assert_released(stack, operator, node)
    # the same pause still holds the automatic repair beside it
    assert held["status"] == "FAILED"
    assert operation_of(held).error is not None
    assert "Reboot Node" not in entered(history(stack, automatic))
