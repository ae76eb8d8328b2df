"""What a node's fault needs: reboot, replace, watch HyperPod repair it, or only alert.

The policy (docs/operations.md, "Healing policy", holds the same table), the first rule that applies:
1. a Slurm controller node → ``alert`` (never replaced, nothing done to it; HyperPod may repair it);
2. HyperPod repairs the node itself (the cluster's NodeRecovery is Automatic) → ``observe``: Autopilot
   steps in past HyperPodRepairDeadlineMinutes;
3. HMA fault type ``NvidiaErrorReboot``, ``NvidiaGpuCountMismatch``, ``NeuronErrorReboot``, or the
   sweep's ``SlurmNotResponding`` → ``reboot``;
4. HMA fault type ``NvidiaErrorTerminate``, ``NeuronErrorTerminate`` → ``replace``;
5. another fault type: the event's RepairAction ``Reboot`` / ``Replace``, else the Recommendation's
   "Reboot" / "Replace" → ``reboot`` / ``replace``;
6. nothing known → ``replace``;
then a login node's ``replace`` becomes ``reboot`` with no escalation, unless AllowLoginReplace=true.

On a Slurm cluster whose agent is connected the repair drains the node first and waits up to
DrainTimeoutMinutes for its jobs to end, except after a fault that already took the node's GPUs
(``GPU_LOST_FAULTS``, ``gpus_lost``): its jobs are requeued at once, since they cannot run on.

Sources:
- Fault types: HMA names its node conditions after the action they need. AWS's Node Health Event
  sample ("Events that Amazon SageMaker AI sends to Amazon EventBridge") pairs ``NvidiaErrorTerminate``
  with "Please Replace the Faulty Node."; the developer guide's "SageMaker HyperPod health-monitoring
  agent" shows ``NvidiaErrorReboot`` for an NVLink Xid and says HMA reboots a node whose GPU / Neuron
  device count does not match its instance type. ``...Terminate`` (the instance must go) → replace,
  ``...Reboot`` and count mismatches → reboot.
- SlurmNotResponding (the sweep: slurmd silent past StuckNodeMinutes while SageMaker shows the instance
  Running, logic/healing/slurm_signal.py) → reboot: what stops slurmd answering on a running instance
  (a hung kernel, memory exhausted, slurmd dead, a stuck mount) is cleared by a reboot in minutes, which
  keeps the node's volumes and name, where a replace takes 20-30 minutes and destroys them. If Slurm
  still does not get the node back, the repair's resume step fails it (NodeNotBackInSlurm) and alerts:
  the same silence since the same sighting is never repaired again, a person decides.
- Unknown → replace (the issue's rule): a replace clears any fault of the instance, a reboot only
  some, and a reboot that does not heal is escalated to a replace after RebootDeadlineMinutes anyway.
- Controller: BatchReplaceClusterNodes is not allowed on a Slurm controller node (API reference), and
  a reboot interrupts every job of the cluster, so a person decides.
- Login: a replace destroys the instance's root and secondary volumes (API reference), where users of
  a login node keep their work; a reboot does not.
- GPUs lost: a ``...Terminate`` fault is one the GPU (Neuron device) does not survive (HMA asks for
  new hardware: uncorrectable memory errors, a device fallen off the bus), and a count mismatch means
  the driver no longer sees a GPU the instance type has; a job's CUDA / Neuron context on it is gone
  either way, so waiting for the job to end only holds the node. ``NvidiaErrorReboot`` (an NVLink
  Xid) and ``NeuronErrorReboot`` leave the devices in place until the reboot: the jobs get the wait.
  Assumed from the fault names and HMA's reboot / replace split; AWS does not say what a fault leaves
  running (docs/operations.md, "Slurm-aware repair").
- Who repairs: the cluster's NodeRecovery (DescribeCluster), never the event's RepairAction. The API
  reference says Automatic "will automatically reboot or replace faulty nodes"; AWS's only published
  Node Health sample says ``"RepairAction": "None"`` beside "Please Replace the Faulty Node." and does
  not define the field, so a ``None`` on an Automatic cluster would otherwise make two actors on one
  node. RepairAction is only a hint of what the fault needs (rule 5).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from autopilot.models.records import NodeAction, RepairActor

if TYPE_CHECKING:
    # Only annotated here: the node-role lookup (topology) imports this module without the repair records.
    from autopilot.models.records import Fault

# HMA fault types a reboot clears, and those that need new hardware.
REBOOT_FAULTS = frozenset(
    {"NvidiaErrorReboot", "NvidiaGpuCountMismatch", "NeuronErrorReboot", "SlurmNotResponding"}
)
REPLACE_FAULTS = frozenset({"NvidiaErrorTerminate", "NeuronErrorTerminate"})
# HMA fault types after which the node's accelerators are gone: its jobs cannot run on (no drain wait).
GPU_LOST_FAULTS = frozenset({"NvidiaErrorTerminate", "NeuronErrorTerminate", "NvidiaGpuCountMismatch"})
# RepairAction values that name a repair (a hint of what the fault needs, not of who acts).
REPAIR_ACTIONS = frozenset({"Reboot", "Replace"})
_FAULT_TYPE = re.compile(r"\bfault type (\w+)")
_RECOMMENDS = re.compile(r"\b(reboot|replace)\b", re.IGNORECASE)


class NodeRole(StrEnum):
    """A node's part in its Slurm cluster, from its instance group."""

    CONTROLLER = "controller"
    LOGIN = "login"
    WORKER = "worker"


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    action: NodeAction
    actor: RepairActor
    # False when the node must not be replaced, even by the escalation of a reboot that did not heal.
    allow_replace: bool
    why: str


def fault_type_of(reason: str | None) -> str | None:
    """The HMA fault type named in a HealthStatusReason ("... detected fault type X on this node ...")."""
    found = _FAULT_TYPE.search(reason or "")
    return found.group(1) if found else None


def gpus_lost(fault: Fault | None) -> bool:
    """Whether ``fault`` already took the node's GPUs (``GPU_LOST_FAULTS``; an operator's request or
    an unknown fault: no, its jobs get the drain wait)."""
    if fault is None:
        return False
    return (fault.fault_type or fault_type_of(fault.reason)) in GPU_LOST_FAULTS


def decide(fault: Fault, role: NodeRole, *, hyperpod_repairs: bool, allow_login_replace: bool) -> Decision:
    """The action for ``fault`` on a node of ``role`` (the table above). ``hyperpod_repairs``: HyperPod
    repairs the node itself (NodeRecovery Automatic, and its repair still has time)."""
    actor = RepairActor.HYPERPOD if hyperpod_repairs else RepairActor.AUTOPILOT
    if role is NodeRole.CONTROLLER:
        return Decision(
            action=NodeAction.ALERT,
            actor=actor,
            allow_replace=False,
            why="a Slurm controller is never replaced",
        )
    allow_replace = role is not NodeRole.LOGIN or allow_login_replace
    if hyperpod_repairs:
        return Decision(
            action=NodeAction.OBSERVE,
            actor=actor,
            allow_replace=allow_replace,
            why=f"NodeRecovery Automatic: HyperPod repairs the node (RepairAction {fault.repair_action})",
        )
    action, why = _autopilot_action(fault)
    if action is NodeAction.REPLACE and not allow_replace:
        return Decision(
            action=NodeAction.REBOOT,
            actor=actor,
            allow_replace=False,
            why=f"{why}; a login node is only rebooted (AllowLoginReplace=false)",
        )
    return Decision(action=action, actor=actor, allow_replace=allow_replace, why=why)


def _autopilot_action(fault: Fault) -> tuple[NodeAction, str]:
    fault_type = fault.fault_type or fault_type_of(fault.reason)
    if fault_type in REBOOT_FAULTS:
        return NodeAction.REBOOT, f"fault type {fault_type} is cleared by a reboot"
    if fault_type in REPLACE_FAULTS:
        return NodeAction.REPLACE, f"fault type {fault_type} needs new hardware"
    if fault.repair_action in REPAIR_ACTIONS:
        return NodeAction(fault.repair_action.lower()), f"HyperPod's RepairAction is {fault.repair_action}"
    recommended = _RECOMMENDS.search(fault.recommendation or "")
    if recommended:
        word = recommended.group(1).lower()
        return NodeAction(word), f"HyperPod recommends: {fault.recommendation}"
    return NodeAction.REPLACE, "an unknown fault is replaced"
