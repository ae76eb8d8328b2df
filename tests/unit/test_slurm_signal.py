"""The sweep's Slurm decision (autopilot.logic.healing.slurm_signal.slurm_findings): over the agent's node
views, SageMaker's node summaries and the nodes' records — which node is resumed, which repaired, and
which an operator's drain keeps from both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from autopilot.logic.healing.decide import NodeRole, decide, gpus_lost
from autopilot.logic.healing.slurm_signal import NOT_RESPONDING_FAULT, SlurmFindings, slurm_findings
from autopilot.models.agent import AgentRecord, SlurmNode
from autopilot.models.records import NodeAction, NodeHealth, NodeRecord, iso

NOW = datetime(2026, 11, 27, 22, 0, tzinfo=UTC)
STUCK = timedelta(minutes=30)
NODE, SLURM = "i-0aaaaaaaaaaaaaaa1", "ip-10-1-2-3"
REBOOTED = "Node unexpectedly rebooted"


def summary(status: str = "Running", node_id: str = NODE, hostname: str = SLURM) -> dict[str, Any]:
    return {
        "InstanceId": node_id,
        "InstanceGroupName": "workers",
        "InstanceStatus": {"Status": status},
        "PrivateDnsHostname": f"{hostname}.ec2.internal",
    }


def report(state: str, reason: str = "", *, since: datetime | None = None) -> AgentRecord:
    return AgentRecord(
        last_seen=NOW,
        agent_version="1.0.0",
        nodes={SLURM: SlurmNode(name=SLURM, state=state, reason=reason, gpus=8)},
        not_responding_since={SLURM: since} if since else {},
    )


def record(**fields: Any) -> dict[str, NodeRecord]:
    return {NODE: NodeRecord(cluster_name="c1", node_id=NODE, **fields)}


def findings(
    agent: AgentRecord,
    *,
    status: str = "Running",
    records: dict[str, NodeRecord] | None = None,
    pending: frozenset[str] = frozenset(),
    automatic: bool = True,
    repaired: frozenset[str] = frozenset(),
    ended: frozenset[str] = frozenset(),
) -> SlurmFindings:
    # automatic (NodeRecovery Automatic) unless said: HyperPod reboots nodes on its own
    return slurm_findings(
        agent,
        [summary(status)],
        records or {},
        pending_resumes=pending,
        now=NOW,
        not_responding_after=STUCK,
        automatic=automatic,
        repaired=repaired,
        ended_operations=ended,
    )


def resumed(found: SlurmFindings) -> list[tuple[str, str]]:
    return [(r.node_id, r.slurm_node) for r in found.resumes]


# --- resume -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", [REBOOTED, f"{REBOOTED} boot_time=1795800000 last response=1795799000"])
def test_a_node_down_only_for_a_reboot_running_and_healthy_is_resumed(reason: str) -> None:
    found = findings(report("DOWN", reason))
    assert resumed(found) == [(NODE, SLURM)]
    assert found.faults == {}


def test_on_a_node_recovery_none_cluster_only_a_reboot_after_an_autopilot_repair_is_resumed() -> None:
    # a manual reboot or a kernel panic: HyperPod reboots nothing itself there, so it is the operator's
    assert resumed(findings(report("DOWN", REBOOTED), automatic=False)) == []
    # a ReplaceNode operation of the instance ended lately (the sweep reads the operation history)
    [resume] = findings(report("DOWN", REBOOTED), automatic=False, repaired=frozenset({NODE})).resumes
    assert (resume.node_id, resume.expect_reason) == (NODE, REBOOTED)
    other = findings(report("DOWN", REBOOTED), automatic=False, repaired=frozenset({"i-0bbbbbbbbbbbbbbb2"}))
    assert resumed(other) == []


def test_a_node_reported_healthy_after_its_fault_is_resumed() -> None:
    healthy = record(health=NodeHealth.HEALTHY, health_since=NOW - timedelta(minutes=2))
    assert resumed(findings(report("DOWN", REBOOTED), records=healthy)) == [(NODE, SLURM)]


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ("DOWN", "Not responding"),  # slurmctld's own timeout, not a reboot
        ("DOWN", "replacing the DIMM (ops)"),  # an operator set it down
        ("DOWN+NOT_RESPONDING", REBOOTED),  # slurmd not back yet: nothing to resume
        ("DOWN*", REBOOTED),
        ("DOWN+DRAIN", REBOOTED),  # a drain is the operator's or a repair's, never the sweep's to lift
        ("IDLE", ""),
        ("IDLE+DRAIN", "autopilot op-20261127210000-0a1b2c3d: reboot (NvidiaErrorReboot)"),
    ],
)
def test_only_a_reboot_is_resumed(state: str, reason: str) -> None:
    assert resumed(findings(report(state, reason))) == []


def test_a_node_sagemaker_does_not_show_running_is_not_resumed() -> None:
    for status in ("Pending", "SystemUpdating", "Failure", "ShuttingDown", "DeepHealthCheckInProgress"):
        assert resumed(findings(report("DOWN", REBOOTED), status=status)) == [], status


def test_a_node_with_an_unhealthy_report_held_is_not_resumed() -> None:
    unhealthy = record(health=NodeHealth.UNHEALTHY, health_since=NOW - timedelta(minutes=1))
    assert resumed(findings(report("DOWN", REBOOTED), records=unhealthy)) == []


def test_a_node_whose_repair_is_open_is_left_to_it() -> None:
    repairing = record(open_repair="op-20261127214000-0a1b2c3d")
    assert findings(report("DOWN", REBOOTED), records=repairing) == SlurmFindings(seen=iso(NOW))


def test_a_node_with_a_resume_pending_gets_no_second() -> None:
    assert resumed(findings(report("DOWN", REBOOTED), pending=frozenset({SLURM}))) == []


def test_slurm_and_sagemaker_nodes_are_matched_by_name() -> None:
    # a Slurm node no SageMaker node has (a replaced instance's old name), and a SageMaker node Slurm
    # does not list: neither is acted on
    found = slurm_findings(
        report("DOWN", REBOOTED),
        [summary(hostname="ip-10-9-9-9"), {**summary(), "PrivateDnsHostname": None}],
        {},
        pending_resumes=frozenset(),
        now=NOW,
        not_responding_after=STUCK,
    )
    assert found == SlurmFindings(seen=iso(NOW))


# --- Autopilot's own drain, left by a repair that ended ---------------------------------------------

OPERATION = "op-20261127210000-0a1b2c3d"
OWN_DRAIN = f"autopilot {OPERATION}: reboot (NvidiaErrorReboot)"


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "DOWN+DRAIN", "MIXED+DRAIN"])
def test_a_drain_whose_repair_ended_is_resumed_expecting_its_reason(state: str) -> None:
    # its drain's result came after the repair stopped waiting: nothing else would ever lift it
    for automatic in (True, False):
        found = findings(report(state, OWN_DRAIN), ended=frozenset({OPERATION}), automatic=automatic)
        [resume] = found.resumes
        assert (resume.node_id, resume.slurm_node) == (NODE, SLURM)
        assert resume.expect_reason == f"autopilot {OPERATION}:"


def test_a_drain_whose_repair_is_running_or_unknown_is_left_to_it() -> None:
    # ``ended`` holds only operations the state store shows this cluster's and no longer RUNNING
    assert resumed(findings(report("IDLE+DRAIN", OWN_DRAIN))) == []
    other = "autopilot op-20261127220000-0b1b2c3d: replace (XidError)"
    assert resumed(findings(report("IDLE+DRAIN", other), ended=frozenset({OPERATION}))) == []


def test_an_ended_repairs_drain_waits_for_the_node_to_be_running_healthy_and_answering() -> None:
    ended = frozenset({OPERATION})
    assert resumed(findings(report("IDLE+DRAIN", OWN_DRAIN), status="Pending", ended=ended)) == []
    unhealthy = record(health=NodeHealth.UNHEALTHY, health_since=NOW - timedelta(minutes=1))
    assert resumed(findings(report("IDLE+DRAIN", OWN_DRAIN), records=unhealthy, ended=ended)) == []
    repairing = record(open_repair="op-20261127214000-0a1b2c3d")
    assert resumed(findings(report("IDLE+DRAIN", OWN_DRAIN), records=repairing, ended=ended)) == []
    assert resumed(findings(report("IDLE+DRAIN+NOT_RESPONDING", OWN_DRAIN), ended=ended)) == []
    assert resumed(findings(report("IDLE+DRAIN", OWN_DRAIN), pending=frozenset({SLURM}), ended=ended)) == []
    # a reason that only looks like Autopilot's (no operation id) is an operator's
    assert resumed(findings(report("IDLE+DRAIN", "autopilot: keep out"), ended=ended)) == []


# --- not responding ---------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["DOWN+NOT_RESPONDING", "IDLE+NOT_RESPONDING", "ALLOCATED*"])
def test_a_node_not_responding_past_stuck_node_minutes_is_a_fault(state: str) -> None:
    since = NOW - STUCK
    found = findings(report(state, "Not responding", since=since))

    fault = found.faults[NODE]
    assert fault.fault_type == NOT_RESPONDING_FAULT
    assert fault.detected_at == since  # the first sighting: the claim takes it once
    assert f"fault type {NOT_RESPONDING_FAULT}" in (fault.reason or "")  # read back from a held report
    assert found.resumes == []


def test_a_node_not_responding_for_less_is_not_yet() -> None:
    found = findings(report("DOWN+NOT_RESPONDING", since=NOW - STUCK + timedelta(seconds=1)))
    assert found.faults == {}


def test_not_responding_without_a_first_sighting_is_not_a_fault() -> None:
    assert findings(report("DOWN+NOT_RESPONDING")).faults == {}


def test_a_node_not_responding_on_an_instance_not_running_is_the_sweeps_usual_business() -> None:
    found = findings(report("DOWN+NOT_RESPONDING", since=NOW - 2 * STUCK), status="Pending")
    assert found.faults == {}


def test_a_not_responding_fault_already_reported_is_not_reported_again() -> None:
    since = NOW - 2 * STUCK
    claimed = record(health=NodeHealth.UNHEALTHY, health_since=since, last_fault_at=since)
    assert findings(report("DOWN+NOT_RESPONDING", since=since), records=claimed).faults == {}


def test_an_unclaimed_unhealthy_report_is_the_fault_not_slurms() -> None:
    # HMA's report (older than the silence) waits for its own path: HyperPod may be repairing the node
    held = record(health=NodeHealth.UNHEALTHY, health_since=NOW - 3 * STUCK)
    assert findings(report("DOWN+NOT_RESPONDING", since=NOW - 2 * STUCK), records=held).faults == {}


def test_a_silence_after_an_older_claimed_fault_is_a_new_fault() -> None:
    before = iso(NOW - 5 * STUCK)
    old = record(health=NodeHealth.UNHEALTHY, health_since=before, last_fault_at=before)
    assert NODE in findings(report("DOWN+NOT_RESPONDING", since=NOW - 2 * STUCK), records=old).faults


def test_the_sweeps_own_drain_does_not_shelter_a_silent_node() -> None:
    # an Autopilot repair that ended (its node freed) and left the node drained and silent
    agent = report("DOWN+DRAIN+NOT_RESPONDING", "autopilot op-1: reboot (x)", since=NOW - 2 * STUCK)
    assert NODE in findings(agent).faults


# --- an operator's drain ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state", ["DOWN+DRAIN+NOT_RESPONDING", "IDLE+DRAIN+NOT_RESPONDING", "DOWN+DRAIN", "MIXED+DRAIN"]
)
def test_an_operators_drain_is_left_alone(state: str) -> None:
    for reason in ("bad HCA, RMA ticket 4711", REBOOTED, "Autopilot please ignore"):
        found = findings(report(state, reason, since=NOW - 10 * STUCK))
        assert found == SlurmFindings(seen=iso(NOW)), (state, reason)


# --- the policy -------------------------------------------------------------------------------------


def test_a_node_slurm_does_not_hear_from_is_rebooted_first() -> None:
    fault = findings(report("DOWN+NOT_RESPONDING", since=NOW - STUCK)).faults[NODE]
    decision = decide(fault, NodeRole.WORKER, hyperpod_repairs=False, allow_login_replace=False)
    assert (decision.action, decision.allow_replace) == (NodeAction.REBOOT, True)
    # its jobs get the drain wait: slurmstepd outlives a dead slurmd, and Slurm ends a DOWN node's jobs
    # itself (SlurmdTimeout) long before StuckNodeMinutes, so the wait is short or nothing
    assert gpus_lost(fault) is False
