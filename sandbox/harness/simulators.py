"""The simulators a ``Sandbox`` installs, as an explicit, typed list (``Simulators``), and the one function
that installs them: what moto lacks (sandbox.services, the SQS redrive) next to the moto it patches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sandbox.emulator import iam_simulation, s3_bucket_owner
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.sqs import MessageMoves
from sandbox.services.budgets import BudgetsSimulator
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.pricing.price_list_api import PricingSimulator
from sandbox.services.running_instances import RunningInstance
from sandbox.services.ssm_sessions import SsmSessionsSimulator


@dataclass(frozen=True)
class Simulators:
    """Everything ``Sandbox(simulators=True)`` installs, in this order (uninstalled in reverse). A new
    simulator is a field here and a line in ``install_simulators``."""

    hyperpod: HyperPodSimulator  # the home region's; every other region's spawns from it on first use
    ssm: SsmSessionsSimulator
    budgets: BudgetsSimulator  # charges the HyperPod fleet of every region
    message_moves: MessageMoves  # the dead-letter queue redrive (moto has no StartMessageMoveTask)
    pricing: PricingSimulator  # the Price List API (moto has no pricing service)

    def ticking(self) -> list[HyperPodSimulator | SsmSessionsSimulator | BudgetsSimulator]:
        """What advances with the clock: every region's HyperPod simulator, SSM sessions (the regions
        spawned from it too: their CloudTrail events, terminations), Budgets."""
        return [*self.hyperpod.every_region(), self.ssm, self.budgets]


class _Installable(Protocol):
    def install(self) -> None: ...
    def uninstall(self) -> None: ...


def install_simulators(
    clock: SandboxClock,
    *,
    region: str,
    account_id: str,
    seed: int | None,
    duplicate_events: float,
    repair_action_none: float,
    undo: list[Callable[[], None]],
) -> Simulators:
    """Install every simulator, then IAM's policy simulator and S3's ExpectedBucketOwner (moto has
    neither: what POST /clusters asks before it uses a role or bucket a caller names). Each uninstall is
    appended to ``undo`` as soon as its install succeeded, so a failure part way undoes what was done."""

    def install[T: _Installable](simulator: T) -> T:
        simulator.install()
        undo.append(simulator.uninstall)
        return simulator

    hyperpod = install(
        HyperPodSimulator(
            clock,
            region=region,
            account_id=account_id,
            seed=seed,
            duplicate_events=duplicate_events,
            repair_action_none=repair_action_none,
        )
    )

    def fleet() -> list[RunningInstance]:  # AWS Budgets counts the account's spend in every region
        return [
            instance for simulator in hyperpod.every_region() for instance in simulator.running_instances()
        ]

    simulators = Simulators(
        hyperpod=hyperpod,
        ssm=install(SsmSessionsSimulator(clock, region=region, account_id=account_id)),
        budgets=install(BudgetsSimulator(clock, fleet=fleet, region=region, account_id=account_id)),
        message_moves=install(MessageMoves(clock.now)),
        pricing=install(PricingSimulator()),
    )
    for seam in (iam_simulation, s3_bucket_owner):
        seam.install()
        undo.append(seam.uninstall)
    return simulators
