"""How Autopilot names what it creates for a cluster's costs: its cost-allocation tags and budget."""

from __future__ import annotations

# Cost-allocation tags Autopilot puts on every cluster (activate them in Billing to see costs by them).
TAG_CLUSTER_NAME = "ClusterName"
TAG_OWNER = "owner"
TAG_PROJECT = "project"
TAG_OPERATION = "autopilot:operation-id"


def budget_name_for(cluster_name: str) -> str:
    """The AWS Budget Autopilot creates for a cluster (also what Cleanup deletes)."""
    return f"hyperpod-{cluster_name}"
