"""The HyperPod simulator: SageMaker cluster operations with lifecycles on the sandbox clock.

One simulator serves one (account, region), like the SageMaker endpoint it stands in for; the
installed ones spawn one for any other pair on its first request (registry.py). Every API call and
every ``tick()`` first moves the lifecycles to ``clock.now()``; each state change becomes the event
HyperPod itself would send, shaped as AWS's samples (events/hyperpod/), on that region's default
EventBridge bus. As on AWS, an event arrives after the call that caused it has returned:
``timings.event_delivery`` simulated seconds after the change, published by a later ``tick()`` or
call, outside the simulator's lock (a target that calls back into the API never waits on the lock it
is being called from). ``duplicate_events`` repeats a seeded share of them, as EventBridge
(at-least-once) and SageMaker ("may send multiple events for each state change") do.

The simulator is built in layers, each a module and a base class of the next: state.py (what it
holds, its timers, lookups) → events.py → node_lifecycle.py → cluster_lifecycle.py → injection.py
(faults) → api.py (the other operations, pagination) → this module (installing it, spawning one per
region, ``call``, the fleet's running instances).
"""

from __future__ import annotations

import hashlib
from typing import Any

from sandbox.services.hyperpod.api import ApiHandlers
from sandbox.services.hyperpod.registry import SIMULATORS
from sandbox.services.hyperpod.responses import install_sagemaker_seam, uninstall_sagemaker_seam
from sandbox.services.hyperpod.state import Params
from sandbox.services.hyperpod.tagging import install_tagging_seam, uninstall_tagging_seam
from sandbox.services.hyperpod.validation import validate_input
from sandbox.services.running_instances import RunningInstance


class HyperPodSimulator(ApiHandlers):
    """Simulated SageMaker HyperPod for one account and region."""

    def install(self) -> None:
        """Serve this (account, region)'s SageMaker cluster calls from the simulator (see responses.py),
        show its clusters to the Resource Groups Tagging API (see tagging.py), and every other
        (account, region) from a simulator spawned from this one on first use (see registry.py)."""
        SIMULATORS.add(self)
        install_sagemaker_seam()
        install_tagging_seam()

    def uninstall(self) -> None:
        """Give moto its own code back when this is the last installed simulator (spawned ones go too)."""
        if SIMULATORS.remove(self):
            uninstall_tagging_seam()
            uninstall_sagemaker_seam()

    def spawn(self, account_id: str, region: str) -> HyperPodSimulator:
        """A simulator for another (account, region): this one's clock, timings and event options,
        and a seed derived from this one's (still reproducible, yet not the same ids in every region)."""
        seed = None
        if self.seed is not None:
            digest = hashlib.sha256(f"{self.seed}/{account_id}/{region}".encode()).digest()
            seed = int.from_bytes(digest[:8], "big")
        return HyperPodSimulator(
            self.clock,
            region=region,
            account_id=account_id,
            timings=self.timings,
            seed=seed,
            duplicate_events=self.duplicate_events,
            repair_action_none=self.repair_action_none,
        )

    def for_region(self, region: str, account_id: str | None = None) -> HyperPodSimulator:
        """The installed simulators' member for (account, region): spawned on first use, as a request
        there would. ``account_id`` defaults to this simulator's."""
        simulator = SIMULATORS.get(account_id or self.account_id, region)
        if simulator is None:
            raise RuntimeError("no HyperPod simulator is installed")
        return simulator

    @staticmethod
    def every_region() -> list[HyperPodSimulator]:
        """Every simulator serving requests: the installed ones and those spawned so far."""
        return SIMULATORS.all()

    def __enter__(self) -> HyperPodSimulator:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def owns_arn(self, arn: str) -> bool:
        with self._lock:
            return arn in self._clusters

    def tagged_clusters(self) -> list[tuple[str, dict[str, str]]]:
        """(ARN, current tags) of every cluster that exists at ``clock.now()`` (the tagging seam's view)."""
        self.tick()
        with self._lock:
            return [(arn, dict(cluster.tags)) for arn, cluster in self._clusters.items()]

    def call(self, operation: str, params: Params) -> dict[str, Any]:
        """Serve one API call (the seam's entry point). Raises ``HyperPodApiError`` as AWS would.

        Events due before the call go out first; the call's own events are due later (``tick``)."""
        handler = self.handler(operation)
        if handler is None:
            raise ValueError(f"the HyperPod simulator does not serve {operation}")
        self.tick()
        with self._lock:
            self._advance(self.clock.now())
            validate_input(operation, params)
            return handler(params)

    # ------------------------------------------------------------------ fleet

    def running_instances(self) -> list[RunningInstance]:
        """The billable instances right now, with their cluster's tags (for the Budgets simulator)."""
        try:
            with self._lock:
                self._advance(self.clock.now())
                # one copy of a cluster's tags shared by its instances (read, never changed)
                tags = {arn: dict(cluster.tags) for arn, cluster in self._clusters.items()}
                return [
                    RunningInstance(
                        cluster_name=cluster.name,
                        cluster_arn=cluster.arn,
                        instance_group=node.group_name,
                        instance_id=node.instance_id,
                        instance_type=node.instance_type,
                        tags=tags[cluster.arn],
                        status=node.status,
                    )
                    for cluster in self._clusters.values()
                    for node in cluster.nodes.values()
                    if node.billable
                ]
        finally:
            self._publish()
