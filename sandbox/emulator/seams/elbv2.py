"""The ELBv2 seam: target registration and health held as AWS holds them
(sandbox/emulator/elbv2_targets.py)."""

from __future__ import annotations

from moto.elbv2.models import ELBv2Backend

from sandbox.emulator import elbv2_targets
from sandbox.emulator.patching import expect_signature
from sandbox.emulator.seams.base import state


def hold_elbv2_targets_as_aws() -> None:
    seam = "hold_elbv2_targets_as_aws"
    expect_signature(
        ELBv2Backend, "register_targets", ["self", "target_group_arn", "instances"], seam, exact=True
    )
    expect_signature(
        ELBv2Backend, "deregister_targets", ["self", "target_group_arn", "instances"], seam, exact=True
    )
    expect_signature(
        ELBv2Backend, "describe_target_health", ["self", "target_group_arn", "targets"], seam, exact=True
    )
    state.undo.append(elbv2_targets.install(now=state.clock.now))
