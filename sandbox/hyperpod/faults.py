"""Faults the HyperPod simulator can inject: what HMA reports, capacity shortfalls, API throttling."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HealthFault:
    """A fault the HyperPod Health Monitoring Agent (HMA) detects, and the repair it asks for."""

    fault_type: str
    reason: str  # the agent's own wording of the cause (Node Problem Detector reason + message)
    repair_action: str  # what the fault needs: Replace | Reboot
    recommendation: str

    def health_status_reason(self) -> str:
        """The Node Health Event's HealthStatusReason, word for word as AWS's sample has it."""
        return (
            f"HyperPod Health Monitoring Agent (HMA) has detected fault type {self.fault_type} "
            "on this node and is unhealthy."
        )


HEALTH_FAULTS: dict[str, HealthFault] = {
    fault.fault_type: fault
    for fault in (
        HealthFault(
            "NvidiaErrorTerminate",
            "XidHardwareFailure, NVRM: Xid (PCI:0000:b9:00): 79, pid=<unknown>, name=<unknown>, "
            "GPU has fallen off the bus.",
            "Replace",
            "Please Replace the Faulty Node.",
        ),
        HealthFault(
            "NvidiaErrorReboot",
            "XidHardwareFailure, NVRM: Xid (PCI:0000:b9:00): 71, pid=<unknown>, name=<unknown>, "
            "NVLink: fatal error detected on link 6.",
            "Reboot",
            "Please Reboot the Faulty Node.",
        ),
        HealthFault(
            "NvidiaGpuCountMismatch",
            "GpuCountMismatch, nvidia-smi reports 7 GPUs, instance type expects 8.",
            "Reboot",
            "Please Reboot the Faulty Node.",
        ),
        HealthFault(
            "NeuronErrorTerminate",
            "NeuronHardwareFailure, Neuron device 3 reported an uncorrectable SRAM error.",
            "Replace",
            "Please Replace the Faulty Node.",
        ),
        HealthFault(
            "NeuronErrorReboot",
            "NeuronRuntimeFailure, Neuron device 0 stopped responding to the runtime.",
            "Reboot",
            "Please Reboot the Faulty Node.",
        ),
    )
}


def health_fault(fault_type: str) -> HealthFault:
    try:
        return HEALTH_FAULTS[fault_type]
    except KeyError:
        known = ", ".join(sorted(HEALTH_FAULTS))
        raise ValueError(f"unknown fault_type {fault_type!r}; known: {known}") from None


def no_capacity_event_message(instance_type: str) -> str:
    """The FailureMessage of a cluster event for an instance that got no capacity (AWS's docs)."""
    return (
        f"We currently do not have sufficient capacity to launch new {instance_type} instances. "
        "Please try again."
    )


def insufficient_capacity_message(instance_type: str, availability_zone: str) -> str:
    """EC2's InsufficientInstanceCapacity wording, as HyperPod relays it in FailureMessage."""
    return (
        f"InsufficientInstanceCapacity: We currently do not have sufficient {instance_type} capacity "
        f"in the Availability Zone you requested ({availability_zone}). Our system will be working on "
        f"provisioning additional capacity. You can currently get {instance_type} capacity by not "
        "specifying an Availability Zone in your request or choosing a different Availability Zone."
    )


@dataclass
class CapacityFault:
    """The next ``times`` matching CreateCluster / UpdateCluster (scale-up) calls run out of capacity."""

    operation: str = "CreateCluster"  # CreateCluster | UpdateCluster
    instance_type: str | None = None  # None: any instance type
    times: int = 1

    def matches(self, operation: str, instance_types: list[str]) -> str | None:
        """The instance type that fails, or None when this fault does not apply."""
        if self.times <= 0 or operation != self.operation:
            return None
        for instance_type in instance_types:
            if self.instance_type is None or instance_type == self.instance_type:
                return instance_type
        return None


@dataclass
class ThrottlePlan:
    """Throttle a share of the calls to some operations; a seeded RNG keeps runs reproducible."""

    rate: float = 0.0
    operations: frozenset[str] | None = None  # None: every HyperPod operation
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError("throttling rate must be between 0 and 1")
        self._rng = random.Random(self.seed)

    def should_throttle(self, operation: str) -> bool:
        if self.rate <= 0.0 or (self.operations is not None and operation not in self.operations):
            return False
        return self._rng.random() < self.rate

    def describe(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "operations": sorted(self.operations) if self.operations is not None else None,
            "seed": self.seed,
        }
