"""Slurm as a signal: what the healing sweep does with a Slurm cluster's latest agent report.

Only while the cluster's agent is connected (logic/agent/status.py): a report is stored only when it came
from the controller group's own role (logic/agent/trust.py), so its view of Slurm is trusted. A Slurm
node is a SageMaker node by name (the first label of its PrivateDnsHostname, as HyperPod names Slurm
nodes); a Slurm node no SageMaker node of the cluster has (a replaced instance's old name) is left alone.

- **Resume after a reboot.** slurmctld sets a node ``DOWN`` "Node unexpectedly rebooted" when its slurmd
  registers after a reboot Slurm did not order, and schedules nothing on it until someone resumes it.
  Only a reboot Autopilot or HyperPod did is the sweep's to undo: on a NodeRecovery ``Automatic``
  cluster (HyperPod reboots and replaces nodes on its own), or when a ReplaceNode operation of that
  instance (its node or its successor) ended within the last 24 hours (the operation history). A
  manual reboot or a kernel panic on a NodeRecovery ``None`` cluster is left to the operator.
- **Resume after Autopilot's own drain.** A repair drains its node with the reason "autopilot
  <operationId>: ..." and resumes it at its end; when the drain's result came late (after the repair
  stopped waiting for it) the node stays drained after the repair, and nothing else would lift it. A
  node ``DRAIN`` with such a reason whose operation is no longer RUNNING (state store) is resumed.
- Either resume is sent only for a node whose instance SageMaker shows Running, with no Unhealthy
  report held, no repair open (a repair resumes its own node) and slurmd answering: a ``resume``
  command for the agent with no task token (nothing waits on it), one at a time (none while a resume of
  it is pending), and with ``expect: {"reasonPrefix": ...}`` — the reason the sweep saw — so the agent
  leaves a node whose reason changed since the report (an operator drained it) as it is.
- **Repair.** A node ``NOT_RESPONDING`` since longer than StuckNodeMinutes (since the first report that
  showed it so, on the product clock: logic/agent/reports.py) whose instance is Running is a fault the
  sweep found, fault type ``SlurmNotResponding`` (logic/healing/decide.py: a reboot first), repaired
  through the same claim as any other.
- **An operator's drain** (``DRAIN`` with a reason Autopilot did not write; Autopilot's start with
  "autopilot ") is neither resumed nor repaired on Slurm's word. SageMaker's own faults of the node
  (Failure, an Unhealthy report, stuck out of Running) still go the usual way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from autopilot.emitted_events import SLURM_NODE_RESUME_REQUESTED, put_event
from autopilot.logic.agent.status import agent_state
from autopilot.models.agent import AgentRecord, SlurmNode, StoredCommand, Verb
from autopilot.models.records import (
    Fault,
    NodeHealth,
    NodeRecord,
    OperationStatus,
    OperationType,
    iso,
)
from autopilot.observability import Count, count, logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient

    from autopilot.dal.agent import AgentTable
    from autopilot.dal.state_store import StateStore

NOT_RESPONDING_FAULT = "SlurmNotResponding"
# slurmctld's reason for a node whose slurmd registered with a newer boot time than it knew (Slurm
# 22.05 says exactly this; later versions append "boot_time=… last response=…").
REBOOTED_REASON = "Node unexpectedly rebooted"
# The drain reasons Autopilot writes (statemachines/replace_node.asl.json, "Drain Node"):
# "autopilot <operationId>: <action> (<fault type>)".
AUTOPILOT_REASON_PREFIX = "autopilot "
_AUTOPILOT_DRAIN = re.compile(r"^autopilot (?P<operation>op-[0-9]{14}-[0-9a-f]{8}):")
# A reboot the sweep resumes on a NodeRecovery None cluster: a repair of the instance ended this lately.
REPAIRED_WITHIN = timedelta(hours=24)
# How far back the operation history is read for those repairs: created up to a day before they
# ended (repairs end in hours: logic/healing/sweep.py, repair_deadline), 100 entries at most.
HISTORY_WINDOW = 2 * REPAIRED_WITHIN
HISTORY_ENTRIES = 100
RUNNING = "Running"
# How long a sweep's resume is handed to the agent: the node answers slurmctld already, so one poll
# does it; 5 minutes and three polls at AgentPollSeconds' maximum (300) allow for a slow or late one.
RESUME_DEADLINE = timedelta(seconds=300 + 3 * 300)


@dataclass(frozen=True)
class Resume:
    node_id: str
    slurm_node: str
    view: SlurmNode
    # the reason the node must still show when the agent resumes it
    expect_reason: str = REBOOTED_REASON


@dataclass(frozen=True)
class SlurmFindings:
    """What the report calls for: resumes to send, and faults by SageMaker node id."""

    resumes: list[Resume] = field(default_factory=list)
    faults: dict[str, Fault] = field(default_factory=dict)
    # the report's lastSeen (one resume command per node and report, whoever sweeps)
    seen: str = ""


def slurm_name(summary: Mapping[str, Any]) -> str | None:
    hostname = summary.get("PrivateDnsHostname")
    return str(hostname).split(".", 1)[0] if hostname else None


def operator_drain(view: SlurmNode) -> bool:
    return "DRAIN" in view.flags and not view.reason.startswith(AUTOPILOT_REASON_PREFIX)


def autopilot_drain(view: SlurmNode) -> str | None:
    """The operation whose drain holds the node (DRAIN, reason "autopilot <operationId>: ..."), if any."""
    found = _AUTOPILOT_DRAIN.match(view.reason) if "DRAIN" in view.flags else None
    return found["operation"] if found else None


def rebooted_down(view: SlurmNode) -> bool:
    """Down only because it rebooted: DOWN with slurmctld's reboot reason, slurmd answering, no drain."""
    return (
        view.base_state == "DOWN"
        and view.reason.startswith(REBOOTED_REASON)
        and not view.not_responding
        and "DRAIN" not in view.flags
    )


def slurm_findings(
    report: AgentRecord,
    summaries: Sequence[Mapping[str, Any]],
    records: Mapping[str, NodeRecord],
    *,
    pending_resumes: Collection[str],
    now: datetime,
    not_responding_after: timedelta,
    automatic: bool = False,
    repaired: Collection[str] = (),
    ended_operations: Collection[str] = (),
) -> SlurmFindings:
    """The decision, over the report's node views, SageMaker's node summaries (ListClusterNodes), the
    nodes' records (health held, open repair), the Slurm nodes a resume is pending for, whether HyperPod
    repairs the cluster's nodes itself (NodeRecovery Automatic), the instances a repair ended lately
    for (``repaired``), and the operations named by Autopilot drains that are no longer RUNNING."""
    resumes: list[Resume] = []
    faults: dict[str, Fault] = {}
    for summary in summaries:
        name = slurm_name(summary)
        view = report.nodes.get(name) if name else None
        if name is None or view is None or operator_drain(view):
            continue
        node_id = summary["InstanceId"]
        record = records.get(node_id)
        if summary["InstanceStatus"]["Status"] != RUNNING or (record and record.open_repair):
            continue  # SageMaker's statuses are the sweep's own business; a repair resumes its node
        held = record is not None and record.health is NodeHealth.UNHEALTHY
        if not held and name not in pending_resumes:
            drained_by = autopilot_drain(view)
            if rebooted_down(view) and (automatic or node_id in repaired):
                resumes.append(Resume(node_id=node_id, slurm_node=name, view=view))
            elif drained_by in ended_operations and not view.not_responding:
                expect = f"{AUTOPILOT_REASON_PREFIX}{drained_by}:"
                resumes.append(Resume(node_id=node_id, slurm_node=name, view=view, expect_reason=expect))
        since = report.not_responding_since.get(name)
        if not view.not_responding or since is None:
            continue
        if now - since < not_responding_after:
            continue
        if record is not None and record.health_since is not None:
            unclaimed = held and (record.last_fault_at is None or record.last_fault_at < record.health_since)
            if unclaimed or record.health_since >= since:
                continue  # the report held is the fault (the sweep's own path), or this one was reported
        faults[node_id] = Fault(
            fault_type=NOT_RESPONDING_FAULT,
            reason=(
                f"Slurm node {name} is {view.state} since {iso(since)} (fault type {NOT_RESPONDING_FAULT}), "
                "past StuckNodeMinutes"
            ),
            detected_at=since,
        )
    return SlurmFindings(resumes=resumes, faults=faults, seen=iso(report.last_seen))


def resume_command_id(slurm_node: str, seen: str) -> str:
    """One id per node and report: two sweeps reading the same report store one command."""
    return hashlib.sha256(f"sweep-resume|{slurm_node}|{seen}".encode()).hexdigest()[:32]


class SlurmSignal:
    """The sweep's reads and writes for Slurm: the agent's report, its pending resumes, the resumes."""

    def __init__(
        self,
        *,
        agents: AgentTable,
        operations: StateStore,
        events: EventBridgeClient,
        poll_seconds: int,
        not_responding_after: timedelta,
    ) -> None:
        self.agents = agents
        self.operations = operations
        self.events = events
        self.poll_seconds = poll_seconds
        self.not_responding_after = not_responding_after

    def findings(
        self,
        cluster_name: str,
        summaries: Sequence[Mapping[str, Any]],
        records: Mapping[str, NodeRecord],
        now: datetime,
        *,
        automatic: bool,
    ) -> SlurmFindings:
        """Nothing without a connected agent (an EKS cluster, a Slurm one without the agent or silent).
        The state table is read only for what the report shows: a node down after a reboot, one held by
        an Autopilot drain."""
        report = self.agents.agent(cluster_name)
        if report is None or agent_state(report, now, self.poll_seconds) != "connected":
            return SlurmFindings()
        rebooted = any(rebooted_down(view) for view in report.nodes.values())
        drains = {op for op in map(autopilot_drain, report.nodes.values()) if op}
        pending: set[str] = set()
        if rebooted or drains:
            pending = {
                c.node for c in self.agents.pending_commands(cluster_name, after=now) if c.verb is Verb.RESUME
            }
        return slurm_findings(
            report,
            summaries,
            records,
            pending_resumes=pending,
            now=now,
            not_responding_after=self.not_responding_after,
            automatic=automatic,
            repaired=self._repaired(cluster_name, now) if rebooted and not automatic else frozenset(),
            ended_operations=self._ended(cluster_name, drains),
        )

    def _repaired(self, cluster_name: str, now: datetime) -> frozenset[str]:
        """The instances (repaired node and successor) of ReplaceNode operations that ended within
        REPAIRED_WITHIN (their updatedAt: the last write is the outcome)."""
        since, ended_after = now - HISTORY_WINDOW, now - REPAIRED_WITHIN
        found: set[str] = set()
        for entry in self.operations.list_history(cluster_name, limit=HISTORY_ENTRIES):
            if entry.at < since:
                break  # newest first
            if entry.operation_type is not OperationType.REPLACE_NODE:
                continue
            operation = self.operations.get_operation(entry.operation_id)
            if operation is None or operation.status is OperationStatus.RUNNING:
                continue
            if operation.updated_at < ended_after:
                continue
            successors = [a.successor_node_id for a in operation.actions or []]
            found.update(i for i in (operation.node_id, operation.successor_node_id, *successors) if i)
        return frozenset(found)

    def _ended(self, cluster_name: str, drains: Collection[str]) -> frozenset[str]:
        """The drains' operations that are this cluster's and no longer RUNNING (one GetItem each; an
        operation the table no longer has is not taken as ended: the drain is left to the operator)."""
        ended: set[str] = set()
        for operation_id in drains:
            operation = self.operations.get_operation(operation_id)
            if (
                operation is not None
                and operation.cluster_name == cluster_name
                and operation.status is not OperationStatus.RUNNING
            ):
                ended.add(operation_id)
        return frozenset(ended)

    def resume(self, cluster_name: str, findings: SlurmFindings, now: datetime) -> Counter[str]:
        """Queue each resume for the agent (its next poll fetches it), counted and announced once."""
        outcomes: Counter[str] = Counter()
        deadline = now + RESUME_DEADLINE
        for resume in findings.resumes:
            command = StoredCommand(
                command_id=resume_command_id(resume.slurm_node, findings.seen),
                verb=Verb.RESUME,
                node=resume.slurm_node,
                deadline=deadline,
                expect={"reasonPrefix": resume.expect_reason},
            )
            if not self.agents.add_command(cluster_name, command, deadline=deadline):
                continue  # another sweep of the same report queued it
            count(Count.SLURM_NODES_RESUMED)
            detail = {
                "clusterName": cluster_name,
                "nodeId": resume.node_id,
                "slurmNode": resume.slurm_node,
                "slurmState": resume.view.state,
                "slurmReason": resume.view.reason,
                "commandId": command.command_id,
                "requestedAt": iso(now),
            }
            put_event(self.events, SLURM_NODE_RESUME_REQUESTED, json.dumps(detail))
            logger.info(
                "Slurm node resume queued",
                cluster=cluster_name,
                node=resume.node_id,
                slurm_node=resume.slurm_node,
                reason=resume.view.reason,
                command_id=command.command_id,
            )
            outcomes["slurm_resumes_queued"] += 1
        return outcomes
