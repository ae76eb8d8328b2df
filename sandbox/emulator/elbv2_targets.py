"""ELBv2 target registration and health as AWS has them, for ``ip`` target groups (seam
``hold_elbv2_targets_as_aws``; moto 5.2.5 is kinder on every point):

- moto registers any IP; ELBv2 takes an IP in a subnet of the target group's VPC (its Availability Zone
  found from the subnet), and one outside it only with ``AvailabilityZone: all`` and from the private
  ranges (RFC 1918, RFC 6598); ``all`` for an IP inside the VPC is refused too. Each refusal is AWS's
  ``ValidationError`` with the message AWS users quote ("The Availability Zone is required for IP
  address '…' because it is not in the VPC").
- moto keys a group's targets by id alone (a second port replaces the first); ELBv2 keys them by id and
  port.
- moto shows a target ``healthy`` from its registration; ELBv2 shows ``initial``
  (Elb.InitialHealthChecking) until HealthyThresholdCount checks HealthCheckIntervalSeconds apart have
  passed, then ``healthy``; a group no load balancer uses shows its targets ``unused``
  (Target.NotInUse).
- moto forgets a deregistered target at once; ELBv2 keeps it ``draining``
  (Target.DeregistrationInProgress) for the group's ``deregistration_delay.timeout_seconds``.

Time is the sandbox clock's. Groups of target type ``instance`` / ``lambda`` / ``alb`` keep moto's
behaviour. What is not confirmed against AWS is listed in docs/sandbox.md ("Unverified against AWS").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from moto.elbv2.exceptions import ELBClientError, InvalidTargetError, TargetGroupNotFoundError
from moto.elbv2.models import ELBv2Backend, FakeHealthStatus, FakeTargetGroup

_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


class _ValidationError(ELBClientError):
    def __init__(self, message: str) -> None:
        super().__init__("ValidationError", message)


@dataclass
class _Held:
    registered_at: datetime
    draining_until: datetime | None = None


def _held(group: FakeTargetGroup) -> dict[tuple[str, int], _Held]:
    found: dict[tuple[str, int], _Held] | None = getattr(group, "sandbox_targets", None)
    if found is None:
        found = {}
        group.sandbox_targets = found  # type: ignore[attr-defined]
    return found


def _port(group: FakeTargetGroup, target: dict[str, Any]) -> int:
    return int(target.get("Port") or group.port)


def _check_ip(group: FakeTargetGroup, target: dict[str, Any]) -> None:
    ip = str(target["Id"])
    try:
        address = ipaddress.ip_address(ip)
    except ValueError as exc:
        raise _ValidationError(f"The IP address '{ip}' is not a valid IPv4 address") from exc
    subnets = group.ec2_backend.describe_subnets(filters={"vpc-id": [group.vpc_id]})
    inside = any(address in ipaddress.ip_network(s.cidr_block) for s in subnets)
    zone = target.get("AvailabilityZone")
    if inside and zone == "all":
        raise _ValidationError(
            f"The IP address '{ip}' is within the VPC, and cannot have its Availability Zone overridden "
            "to 'all'"
        )
    if not inside and zone != "all":
        raise _ValidationError(
            f"The Availability Zone is required for IP address '{ip}' because it is not in the VPC"
        )
    if not inside and not any(address in network for network in _PRIVATE):
        raise _ValidationError(f"The IP address '{ip}' is not a private IP address")


def install(now: Callable[[], datetime]) -> Callable[[], None]:
    """Replace moto's register / deregister / health of targets; the undo."""
    originals = {
        name: ELBv2Backend.__dict__[name]
        for name in ("register_targets", "deregister_targets", "describe_target_health")
    }

    def group_of(backend: ELBv2Backend, arn: str) -> FakeTargetGroup:
        group = backend.target_groups.get(arn)
        if group is None:
            raise TargetGroupNotFoundError()
        return group

    def register_targets(self: ELBv2Backend, target_group_arn: str, instances: list[Any]) -> None:
        group = group_of(self, target_group_arn)
        if group.target_type != "ip":
            return originals["register_targets"](self, target_group_arn, instances)  # type: ignore[no-any-return]
        for target in instances:  # all checked before any is registered, as one request
            _check_ip(group, target)
        held = _held(group)
        for target in instances:
            key = (str(target["Id"]), _port(group, target))
            if key not in held or held[key].draining_until is not None:
                held[key] = _Held(registered_at=now())
        return None

    def deregister_targets(
        self: ELBv2Backend, target_group_arn: str, instances: list[dict[str, Any]]
    ) -> None:
        group = group_of(self, target_group_arn)
        if group.target_type != "ip":
            return originals["deregister_targets"](self, target_group_arn, instances)  # type: ignore[no-any-return]
        held = _held(group)
        keys = [(str(t["Id"]), _port(group, t)) for t in instances]
        if any(key not in held for key in keys):
            raise InvalidTargetError()
        delay = timedelta(seconds=int(str(group.attributes.get("deregistration_delay.timeout_seconds", 300))))
        for key in keys:
            if held[key].draining_until is None:
                held[key].draining_until = now() + delay
        return None

    def describe_target_health(
        self: ELBv2Backend, target_group_arn: str, targets: list[dict[str, Any]]
    ) -> list[FakeHealthStatus]:
        group = group_of(self, target_group_arn)
        if group.target_type != "ip":
            return originals["describe_target_health"](self, target_group_arn, targets)  # type: ignore[no-any-return]
        held = _held(group)
        at = now()
        for key, leaving in list(held.items()):
            if leaving.draining_until is not None and at >= leaving.draining_until:
                del held[key]
        keys = [(str(t["Id"]), _port(group, t)) for t in targets] if targets else list(held)
        checks = timedelta(
            seconds=int(group.health_check_interval_seconds) * int(group.healthy_threshold_count)
        )
        answers = []
        for ip, port in keys:
            entry = held.get((ip, port))
            state: tuple[str, str | None, str | None]
            if entry is None:
                state = ("unused", "Target.NotRegistered", "Target is not registered to the target group")
            elif entry.draining_until is not None:
                state = (
                    "draining",
                    "Target.DeregistrationInProgress",
                    "Target deregistration is in progress",
                )
            elif not group.load_balancer_arns:
                state = (
                    "unused",
                    "Target.NotInUse",
                    "Target group is not configured to receive traffic from the load balancer",
                )
            elif at - entry.registered_at < checks:
                state = ("initial", "Elb.InitialHealthChecking", "Initial health checks in progress")
            else:
                state = ("healthy", None, None)
            answers.append(FakeHealthStatus(ip, port, group.health_check_port, *state))  # type: ignore[arg-type]
        return answers

    for name, replacement in (
        ("register_targets", register_targets),
        ("deregister_targets", deregister_targets),
        ("describe_target_health", describe_target_health),
    ):
        setattr(ELBv2Backend, name, replacement)

    def undo() -> None:
        for name, original in originals.items():
            setattr(ELBv2Backend, name, original)

    return undo
