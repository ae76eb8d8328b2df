"""Faults the HyperPod simulator can inject: what HMA reports and capacity shortfalls (API throttling
and 5xx on any service are sandbox.emulator.aws_calls faults)."""

from __future__ import annotations

from dataclasses import dataclass


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
    """The next ``times`` matching CreateCluster / UpdateCluster (scale-up) calls run out of capacity.

    A cluster with NodeProvisioningMode Continuous does not fail: each launch round (the call's, then
    every background retry) takes one of ``times``, and in it ``available`` instances of each matching
    group get capacity, the rest fail and are retried."""

    operation: str = "CreateCluster"  # CreateCluster | UpdateCluster
    instance_type: str | None = None  # None: any instance type
    times: int = 1
    available: int = 0  # Continuous: instances per group and round that still get capacity

    def covers(self, instance_type: str) -> bool:
        return self.instance_type is None or self.instance_type == instance_type

    def matches(self, operation: str, instance_types: list[str]) -> str | None:
        """The instance type that fails, or None when this fault does not apply."""
        if self.times <= 0 or operation != self.operation:
            return None
        for instance_type in instance_types:
            if self.covers(instance_type):
                return instance_type
        return None
