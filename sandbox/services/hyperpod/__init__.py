"""The sandbox's SageMaker HyperPod simulator (cluster and node lifecycles, faults, events).

    sim = HyperPodSimulator(clock, region="us-east-1", account_id="123456789012")
    sim.install()      # SageMaker cluster calls for that account/region now reach the simulator
    sim.tick()         # advance lifecycles to clock.now(), publish the EventBridge events
    sim.apply_fault("node_unhealthy", {"cluster": "my-cluster"})
    sim.running_instances()
    sim.uninstall()

One simulator per (account, region): while one is installed, a request for any other pair gets its
own, spawned from it on first use (``sim.for_region("us-west-2")``, ``sim.every_region()``).
"""

from sandbox.services.hyperpod.events import CLUSTER_EVENT, NODE_HEALTH, STATE_CHANGE
from sandbox.services.hyperpod.faults import HEALTH_FAULTS
from sandbox.services.hyperpod.model import HyperPodTimings
from sandbox.services.hyperpod.operations import HYPERPOD_OPERATIONS, TAG_OPERATIONS
from sandbox.services.hyperpod.responses import install_sagemaker_seam, uninstall_sagemaker_seam
from sandbox.services.hyperpod.simulator import HyperPodSimulator
from sandbox.services.hyperpod.validation import HyperPodApiError

__all__ = [
    "CLUSTER_EVENT",
    "HEALTH_FAULTS",
    "HYPERPOD_OPERATIONS",
    "NODE_HEALTH",
    "STATE_CHANGE",
    "TAG_OPERATIONS",
    "HyperPodApiError",
    "HyperPodSimulator",
    "HyperPodTimings",
    "install_sagemaker_seam",
    "uninstall_sagemaker_seam",
]
