"""provisioning-parameters.json: how the Slurm lifecycle scripts map instance groups to Slurm roles.

The file is read by the lifecycle scripts on the nodes (the workshop's ``provisioning_parameters.json``),
not by the CreateCluster API, so its keys are snake_case and unknown keys are kept (a custom
lifecycle script may read them); the validation engine reports them as warnings.
"""

from __future__ import annotations

from typing import Annotated, Literal

from annotated_types import Len
from pydantic import BaseModel, ConfigDict

from autopilot_config.models.cluster_config import (
    ClusterDnsName,
    ClusterInstanceGroupName,
    ClusterMountName,
)
from autopilot_config.models.constraints import Text

# slurm.conf splits on whitespace, commas and '=', so a partition name cannot contain them.
SlurmPartitionName = Annotated[
    str, Text(1, None, r"[^\s,=]+", "must be a Slurm partition name (no spaces, commas or '=')")
]


class _ProvisioningShape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)


class WorkerGroup(_ProvisioningShape):
    instance_group_name: ClusterInstanceGroupName
    partition_name: SlurmPartitionName


class ProvisioningParameters(_ProvisioningShape):
    version: Annotated[str, Text(1)]
    workload_manager: Literal["slurm"]
    controller_group: ClusterInstanceGroupName
    login_group: ClusterInstanceGroupName | None = None
    worker_groups: Annotated[list[WorkerGroup], Len(1, None)]
    fsx_dns_name: ClusterDnsName | None = None
    fsx_mountname: ClusterMountName | None = None


KNOWN_KEYS = frozenset(ProvisioningParameters.model_fields)
KNOWN_WORKER_GROUP_KEYS = frozenset(WorkerGroup.model_fields)
