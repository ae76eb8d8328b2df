"""The SageMaker operations the HyperPod simulator answers (the seam routes exactly these to it)."""

from __future__ import annotations

HYPERPOD_OPERATIONS = (
    "CreateCluster",
    "DescribeCluster",
    "ListClusters",
    "UpdateCluster",
    "DeleteCluster",
    "UpdateClusterSoftware",
    "ListClusterNodes",
    "DescribeClusterNode",
    "BatchDeleteClusterNodes",
    "BatchRebootClusterNodes",
    "BatchReplaceClusterNodes",
    "MoveClusterNodes",
    "ListClusterEvents",
    "DescribeClusterEvent",
)
# Served for simulated cluster ARNs only; every other resource's tags stay with moto.
TAG_OPERATIONS = ("AddTags", "ListTags", "DeleteTags")
