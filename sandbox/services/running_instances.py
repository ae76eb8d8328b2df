"""What the HyperPod simulator tells the Budgets simulator: which instances are running, for whom."""

from __future__ import annotations

from typing import NamedTuple


class RunningInstance(NamedTuple):
    """One billable instance in the simulated fleet, at the moment it is sampled."""

    cluster_name: str
    cluster_arn: str
    instance_group: str
    instance_id: str
    instance_type: str
    tags: dict[str, str]  # the cluster's tags (cost allocation: ClusterName, owner, project, ...)
    status: str = "Running"  # the node's InstanceStatus: billed while rebooting, reachable only when Running
