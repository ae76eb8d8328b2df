"""Pydantic models of the documents users hand to HyperPod Autopilot."""

from autopilot.models.cluster_config import CreateClusterRequest
from autopilot.models.provisioning import ProvisioningParameters

__all__ = ["CreateClusterRequest", "ProvisioningParameters"]
