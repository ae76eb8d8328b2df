"""The healing sweep: what the event path missed, never acted on twice.

Every HealingSweepScheduleExpression, for each ACTIVE registered cluster:

- a node is faulty when Autopilot holds an Unhealthy report of it that no repair claimed (repairs were
  paused, or its start failed), when SageMaker shows it in ``Failure``, or when it has not been
  ``Running`` for StuckNodeMinutes (``Pending``, ``SystemUpdating``: a launch or an update that never
  ends). A fault the sweep finds itself is recorded as an Unhealthy report (GET .../nodes shows it) and
  counts towards the breaker like an event's;
- a faulty node without an open repair gets one through the same claim as an event's
  (logic/healing/start_repair.py, trigger ``sweep``): a fault is claimed once, whoever finds it;
- on a NodeRecovery ``Automatic`` cluster HyperPod repairs an Unhealthy node itself, so the sweep steps
  in only past HyperPodRepairDeadlineMinutes (+ DeepHealthCheckMinutes for a group that runs
  OnStartDeepHealthChecks: HyperPod's replacement is checked before it serves), or at once for a node
  in ``Failure``;
- a paused cluster starts nothing (the reports are kept, so the sweep after the resume starts them);
- on a Slurm cluster whose agent is connected, Slurm's view is a signal too: a node down only for a
  reboot Autopilot or HyperPod did is resumed, as is one an ended repair's drain still holds, one not
  responding past StuckNodeMinutes repaired, an operator's drain left alone
  (logic/healing/slurm_signal.py);
- lease holders and nodes' open repairs whose operation is no longer RUNNING (its execution died) are
  released, and ReplaceNode operations RUNNING
  past their deadline (counted from the sweep's first sighting of them, on the sweep's own clock:
  dal/repair_watch.py) are failed with the cause, their execution stopped, their lease and node freed,
  and announced (``Node Repair Failed`` goes to the alerts topic).

One cluster failing (AWS throttling past the retries, a cluster deleted meanwhile) does not stop the
others; the sweep then raises at the end, so the function's Errors metric shows it. Running it twice
changes nothing the first run did not.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.aws import error_code
from autopilot.emitted_events import emit_operation_failed
from autopilot.errors import WorkflowStartError
from autopilot.logic.healing.breaker import BreakerContentionError, announce_trip, record_unhealthy
from autopilot.logic.healing.decide import decide, fault_type_of
from autopilot.logic.healing.slurm_signal import SlurmFindings
from autopilot.logic.healing.start_repair import RepairRequest, slurm_steps_seconds, start_repair
from autopilot.models.records import (
    ClusterStatus,
    Fault,
    NodeHealth,
    NodeRecord,
    Operation,
    OperationError,
    OperationType,
    RepairTrigger,
    iso,
)
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient

    from autopilot.dal.healing import HealingTable
    from autopilot.dal.repair_watch import RepairWatch
    from autopilot.dal.state_store import StateStore
    from autopilot.dal.stuck_nodes import StuckNodes
    from autopilot.logic.healing.slurm_signal import SlurmSignal
    from autopilot.logic.healing.topology import ClusterTopology, TopologyReader
    from autopilot.settings import HealingSettings

# Statuses a node passes through on its way to Running; one it stays in past StuckNodeMinutes is stuck.
# Not DeepHealthCheckInProgress (HyperPod replaces a node that fails its checks itself, and the checks
# take as long as they take) nor ShuttingDown / NotFound (the node is leaving the cluster).
STUCK_STATUSES = frozenset({"Pending", "SystemUpdating"})
# A node MoveClusterNodes is moving to another instance group (its own cluster's or another's): neither
# broken nor stuck, and no repair may start on it; once moved it is gone from this group, which is not
# a failure either.
MOVING_STATUSES = frozenset({"DetachInProgress", "AttachInProgress"})
FAILURE = "Failure"
RUNNING = "Running"
# RUNNING operations older than this are not read again (as the reconciler; repairs end in hours).
LOOKBACK = timedelta(days=14)
DEADLINE_EXCEEDED = "Autopilot.RepairDeadlineExceeded"


class SweepIncompleteError(RuntimeError):
    """Some clusters could not be swept (the others were); the next run tries them again."""


def repair_deadline(settings: HealingSettings, *, deep_health_checks: bool = False) -> timedelta:
    """How long a repair may hold its slot: the longest path (HyperPod's own repair, or a reboot,
    then a replace) fits in the three deadlines together, with a Slurm-aware repair's drain, wait for
    the jobs, requeue and resume (the wait for the slot is not counted); on a deep-health group both
    the observed repair and the replace wait for a new instance's checks
    (logic/healing/start_repair.py, ``repair_deadlines``)."""
    allowance = 2 * settings.deep_health_check_minutes if deep_health_checks else 0
    return timedelta(
        minutes=settings.reboot_deadline_minutes
        + settings.replace_deadline_minutes
        + settings.hyperpod_repair_deadline_minutes
        + allowance,
        seconds=slurm_steps_seconds(settings),
    )


def hyperpod_deadline(settings: HealingSettings, *, deep_health_checks: bool) -> timedelta:
    """How long HyperPod's own repair of a node may take before Autopilot steps in."""
    allowance = settings.deep_health_check_minutes if deep_health_checks else 0
    return timedelta(minutes=settings.hyperpod_repair_deadline_minutes + allowance)


class HealingSweep:
    def __init__(
        self,
        *,
        store: StateStore,
        healing: HealingTable,
        stuck: StuckNodes,
        watch: RepairWatch,
        topology: TopologyReader,
        sagemaker: SageMakerClient,
        stepfunctions: SFNClient,
        events: EventBridgeClient,
        sns: SNSClient,
        settings: HealingSettings,
        stuck_node_minutes: int,
        slurm: SlurmSignal | None = None,
    ) -> None:
        self.store = store
        self.healing = healing
        self.stuck = stuck
        self.watch = watch
        self.topology = topology
        self.sagemaker = sagemaker
        self.stepfunctions = stepfunctions
        self.events = events
        self.sns = sns
        self.settings = settings
        self.stuck_after = timedelta(minutes=stuck_node_minutes)
        self.slurm = slurm

    def run(self, now: datetime) -> dict[str, int]:
        """Sweep every ACTIVE registered cluster and close overdue repairs; how many of each outcome."""
        outcomes: Counter[str] = Counter()
        failed: list[str] = []
        for name in self._active_clusters():
            try:
                outcomes.update(self.sweep_cluster(name, now))
            except (ClientError, BotoCoreError, BreakerContentionError):
                logger.exception("cluster not swept", cluster=name)
                failed.append(name)
        outcomes.update(self.close_overdue_repairs(now))
        if failed:
            raise SweepIncompleteError(f"clusters not swept: {', '.join(failed)} (the others were)")
        return dict(outcomes)

    def _active_clusters(self) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            page = self.store.list_clusters(limit=100, next_token=token)
            names += [c.cluster_name for c in page.items if c.status is ClusterStatus.ACTIVE]
            token = page.next_token
            if token is None:
                return names

    def sweep_resumed(self, name: str, now: datetime) -> Counter[str]:
        """The sweep of the one cluster an operator resumed (its Healing Resumed event), while it is
        ACTIVE: EventBridge retries the event for up to an hour, and a delete may have begun since."""
        cluster = self.store.get_cluster(name)
        if cluster is None or cluster.status is not ClusterStatus.ACTIVE:
            logger.info("resumed cluster not swept: no longer ACTIVE", cluster=name)
            return Counter({"cluster_not_active": 1})
        return self.sweep_cluster(name, now)

    # --- one cluster --------------------------------------------------------------------------

    def sweep_cluster(self, name: str, now: datetime) -> Counter[str]:
        outcomes: Counter[str] = Counter()
        released = self.healing.prune_lease_holders(name)
        outcomes["leases_released"] += len(released)
        # A repair whose execution died (recorded FAILED by RecordOutcome or the reconciler) never
        # removed its node's openRepair: free the node, or no repair could ever claim it again.
        outcomes["nodes_freed"] += len(self.healing.prune_open_repairs(name))
        topology = self.topology.cluster(name)
        if topology is None:
            outcomes["cluster_gone"] += 1
            return outcomes
        automatic = topology.automatic_recovery
        records = {r.node_id: r for r in self.healing.list_nodes(name)}
        not_running_since = self.stuck.not_running_since(name)
        # A replace launches its new instance after the repair started: a Pending node launched since the
        # oldest open repair may be one, and its repair's own deadline covers it.
        open_repairs = [self.healing.get_operation(r.open_repair) for r in records.values() if r.open_repair]
        repairing_since = min((o.created_at for o in open_repairs if o is not None), default=None)
        paused = self.healing.get_healing(name).paused
        summaries = self._nodes(name)
        slurm = (
            self.slurm.findings(name, summaries, records, now, automatic=automatic)
            if self.slurm
            else SlurmFindings()
        )
        for summary in summaries:
            node_id = summary["InstanceId"]
            status = summary["InstanceStatus"]["Status"]
            if status == RUNNING and node_id in not_running_since:
                self.stuck.clear(name, node_id)
            record = records.get(node_id)
            fault, new = self._fault(
                name,
                summary,
                record,
                not_running_since,
                now,
                automatic=automatic,
                deep_health_checks=topology.deep_health_checks(summary["InstanceGroupName"]),
                repairing_since=repairing_since,
            )
            if fault is None and node_id in slurm.faults:
                fault, new = slurm.faults[node_id], True
            if fault is None:
                continue
            if record is not None and record.open_repair is not None:
                outcomes["repair_open"] += 1
                continue
            group = summary["InstanceGroupName"]
            if new:
                paused = (
                    self._report(name, node_id, fault=fault, group=group, topology=topology, now=now)
                    or paused
                )
            if paused:
                # kept as an Unhealthy report: the sweep after the resume starts its repair
                outcomes["unhealthy_while_paused"] += 1
                continue
            outcomes[self._start(name, node_id, group=group, fault=fault, topology=topology, now=now)] += 1
        if self.slurm is not None and not paused:
            # paused, nothing is resumed either: the pause may be a correlated fault's
            outcomes.update(self.slurm.resume(name, slurm, now))
        return outcomes

    def _nodes(self, name: str) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"ClusterName": name, "MaxResults": 100}
        while True:
            page = self.sagemaker.list_cluster_nodes(**kwargs)
            nodes += [dict(n) for n in page.get("ClusterNodeSummaries", [])]
            if not page.get("NextToken"):
                return nodes
            kwargs["NextToken"] = page["NextToken"]

    def _fault(
        self,
        name: str,
        summary: dict[str, Any],
        record: NodeRecord | None,
        not_running_since: dict[str, datetime],
        now: datetime,
        *,
        automatic: bool,
        deep_health_checks: bool,
        repairing_since: datetime | None,
    ) -> tuple[Fault | None, bool]:
        """The node's fault, if any, and whether the sweep is the first to find it."""
        node_id = summary["InstanceId"]
        status = summary["InstanceStatus"]["Status"]
        if status in MOVING_STATUSES:
            return None, False  # an Unhealthy report held waits until the node has arrived
        if record is not None and record.health is NodeHealth.UNHEALTHY and record.health_since:
            # The report held is the fault: acted on once (a claim set lastFaultAt to it), never again.
            if record.last_fault_at is not None and record.last_fault_at >= record.health_since:
                return None, False
            if automatic and status != FAILURE:
                waited = now - record.health_since
                if waited < hyperpod_deadline(self.settings, deep_health_checks=deep_health_checks):
                    return None, False  # HyperPod's own repair still has time
            reason = record.health_reason
            return Fault(
                fault_type=fault_type_of(reason), reason=reason, detected_at=record.health_since
            ), False
        if status == FAILURE:
            message = summary["InstanceStatus"].get("Message") or "no message"
            reason = f"InstanceStatus Failure found by the sweep: {message}"
            return Fault(fault_type=fault_type_of(message), reason=reason, detected_at=now), True
        launched = summary.get("LaunchTime")
        if status == "Pending" and repairing_since is not None and launched and launched >= repairing_since:
            return None, False
        if status in STUCK_STATUSES:
            since = not_running_since.get(node_id) or self.stuck.mark_not_running(
                name, node_id, status=status, at=now
            )
            stuck_after = self.stuck_after
            if automatic:
                # HyperPod's own reboot or replace keeps a node out of Running for minutes to an hour
                # (the missed event named it): one actor per node, so its deadline first.
                stuck_after = max(
                    stuck_after, hyperpod_deadline(self.settings, deep_health_checks=deep_health_checks)
                )
            if now - since < stuck_after:
                return None, False
            reason = f"not Running since {iso(since)} (now {status}), past StuckNodeMinutes"
            return Fault(reason=reason, detected_at=now), True
        return None, False

    def _report(
        self, name: str, node_id: str, *, fault: Fault, group: str, topology: ClusterTopology, now: datetime
    ) -> bool:
        """Record a fault the sweep found as an Unhealthy report, and in the breaker; whether repairs
        are paused now."""
        self.healing.record_health(
            name,
            node_id,
            NodeHealth.UNHEALTHY,
            reason=fault.reason,
            at=fault.detected_at,
            instance_group=group,
        )
        outcome = record_unhealthy(
            self.healing, name, node_id, at=now, node_count=topology.node_count, settings=self.settings
        )
        announce_trip(outcome, table=self.healing, settings=self.settings, sns=self.sns, events=self.events)
        return outcome.state.paused

    def _start(
        self, name: str, node_id: str, *, group: str, fault: Fault, topology: ClusterTopology, now: datetime
    ) -> str:
        # The sweep acts only where HyperPod's own repair is not expected or is past its deadline
        # (``_fault``): Autopilot repairs, whatever NodeRecovery says.
        decision = decide(
            fault,
            topology.role(group),
            hyperpod_repairs=False,
            allow_login_replace=self.settings.allow_login_replace,
        )
        request = RepairRequest(
            cluster_name=name,
            node_id=node_id,
            action=decision.action,
            trigger=RepairTrigger.SWEEP,
            fault=fault,
            actor=decision.actor,
            instance_group=group,
            allow_replace=decision.allow_replace,
            deep_health_checks=topology.deep_health_checks(group),
        )
        try:
            started = start_repair(
                request,
                healing=self.healing,
                stepfunctions=self.stepfunctions,
                events=self.events,
                settings=self.settings,
                now=now,
            )
        except WorkflowStartError:
            # recorded FAILED and announced by start_repair; the claim is undone, so the next run retries
            return "repair_not_started"
        return "repair_started" if started else "already_claimed"

    # --- overdue repairs ----------------------------------------------------------------------

    def close_overdue_repairs(self, now: datetime) -> Counter[str]:
        outcomes: Counter[str] = Counter()
        deadline = repair_deadline(self.settings)
        holders: dict[str, set[str]] = {}
        topologies: dict[str, ClusterTopology | None] = {}
        for operation in self.store.list_running_operations(created_after=now - LOOKBACK):
            if operation.operation_type is not OperationType.REPLACE_NODE:
                continue
            cluster = operation.cluster_name
            if cluster not in holders:
                holders[cluster] = self.healing.get_healing(cluster).lease_holders
            if operation.operation_id not in holders[cluster]:
                # Still waiting for a repair slot (a storm's backlog, or healing paused): its workflow
                # bounds that wait itself; the action deadlines run from the slot on.
                continue
            seen = self.watch.running_since(operation.operation_id, at=now)
            if seen is None or now - seen < deadline:
                continue
            allowed = deadline
            if self._deep_health_checks(operation, topologies):
                allowed = repair_deadline(self.settings, deep_health_checks=True)
                if now - seen < allowed:
                    continue
            outcomes[
                "overdue_failed" if self._fail_overdue(operation, allowed, now) else "overdue_final"
            ] += 1
        return outcomes

    def _deep_health_checks(
        self, operation: Operation, topologies: dict[str, ClusterTopology | None]
    ) -> bool:
        """Whether the repaired node's group runs OnStartDeepHealthChecks (read only for a repair past
        the plain deadline: one GetItem, and one DescribeCluster per cluster)."""
        node = self.healing.get_node(operation.cluster_name, operation.node_id or "")
        if node is None or node.instance_group is None:
            return False
        cluster = operation.cluster_name
        if cluster not in topologies:
            topologies[cluster] = self.topology.cluster(cluster)
        topology = topologies[cluster]
        return topology is not None and topology.deep_health_checks(node.instance_group)

    def _fail_overdue(self, operation: Operation, deadline: timedelta, now: datetime) -> bool:
        """Fail a repair RUNNING past its deadline: record, stop, free its node and lease, announce.
        False when it ended meanwhile."""
        minutes = int(deadline.total_seconds() // 60)
        error = OperationError(
            error=DEADLINE_EXCEEDED,
            cause=(
                f"the repair of node {operation.node_id} was still running {minutes} "
                "minutes after the sweep first saw it (RebootDeadlineMinutes + ReplaceDeadlineMinutes + "
                "HyperPodRepairDeadlineMinutes + DrainTimeoutMinutes + 100 for the Slurm steps, + twice "
                "DeepHealthCheckMinutes for a deep-health group); "
                "the healing sweep stopped it"
            ),
        )
        node = self.healing.get_node(operation.cluster_name, operation.node_id or "")
        try:
            # The operation FAILED and the node's openRepair removed together; lastFaultAt stays, so
            # this fault is not repaired again on its own (a person looks at the alert).
            self.healing.fail_unstarted_repair(
                operation, error, previous_fault_at=node.last_fault_at if node else None, now=now
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            # The node no longer names this repair (or the operation ended): record the operation alone
            # (the cluster item is left alone: a repair is never its lastOperationId).
            if not self.store.fail_running_operation(
                operation, error, cluster_status=ClusterStatus.ACTIVE, sagemaker_status=None, now=now
            ):
                return False
        self._stop(operation, error)
        self.healing.release_leases(operation.cluster_name, {operation.operation_id})
        emit_operation_failed(operation, error, client=self.events)
        logger.warning(
            "overdue repair failed", cluster=operation.cluster_name, operation_id=operation.operation_id
        )
        return True

    def _stop(self, operation: Operation, error: OperationError) -> None:
        execution_arn = operation.execution_arn or (
            f"{self.settings.replace_node_state_machine_arn.replace(':stateMachine:', ':execution:', 1)}"
            f":{operation.operation_id}"
        )
        try:
            self.stepfunctions.stop_execution(
                executionArn=execution_arn, error=error.error, cause=error.cause[:32768]
            )
        except ClientError as exc:
            if error_code(exc) != "ExecutionDoesNotExist":
                raise
