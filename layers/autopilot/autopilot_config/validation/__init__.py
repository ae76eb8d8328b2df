"""One validation engine for cluster-config.json and provisioning-parameters.json.

Used by ``autopilot validate``, the REST API and the create-cluster workflow::

    report = validate_config(cluster_config, provisioning_parameters, online=OnlineChecker(region=...))
    report.valid, report.errors, report.warnings, report.to_dict()
"""

from autopilot_config.validation.caps import ClusterCaps
from autopilot_config.validation.eks_clusters import EksClusterPolicy
from autopilot_config.validation.engine import validate_config
from autopilot_config.validation.execution_roles import ExecutionRolePolicy, split_patterns
from autopilot_config.validation.online import OnlineChecker
from autopilot_config.validation.report import (
    CLUSTER_CONFIG,
    PROVISIONING_PARAMETERS,
    Problem,
    ValidationReport,
)
from autopilot_config.validation.schema import load_document

__all__ = [
    "CLUSTER_CONFIG",
    "PROVISIONING_PARAMETERS",
    "ClusterCaps",
    "EksClusterPolicy",
    "ExecutionRolePolicy",
    "OnlineChecker",
    "Problem",
    "ValidationReport",
    "load_document",
    "split_patterns",
    "validate_config",
]
