"""Which EKS clusters a HyperPod cluster may be orchestrated by: the stack's ``EksClusterNames``.

The CreateCluster workflow's role holds the EKS permissions HyperPod needs to set up an EKS
orchestrator (access entries, access policies) only on those clusters (template.yaml, the
CreateClusterEksAccess policy). Without this check a caller naming any EKS cluster of the account in
``Orchestrator.Eks.ClusterArn`` had Autopilot give HyperPod's nodes access to it (issue 20, finding 4);
refusing it up front names the field instead of failing the workflow minutes later.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from autopilot_config.validation.documents import ClusterDocuments
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG


@dataclass(frozen=True)
class EksClusterPolicy:
    """``Orchestrator.Eks.ClusterArn`` must be a cluster of ``account`` in ``region`` whose name
    matches one of ``names`` (``*`` and ``?`` wildcards, as the IAM statements read them); no names:
    no EKS orchestrator at all."""

    names: tuple[str, ...]
    account: str
    region: str

    def check(self, docs: ClusterDocuments, findings: Findings) -> None:
        located = docs.eks_cluster_arn
        if located is None:
            return
        parts = located.value.split(":", 5)
        if len(parts) != 6 or parts[2] != "eks" or not parts[5].startswith("cluster/"):
            return  # not an EKS cluster ARN: the schema and the ARN rules report it
        account, region, name = parts[4], parts[3], parts[5].removeprefix("cluster/")
        if region != self.region:
            return  # the ARN rules report a cluster of another region (autopilot_config.validation.rules)
        if not self.names:
            findings.error(
                CLUSTER_CONFIG,
                located.path,
                "this Autopilot stack allows no EKS orchestrator (its EksClusterNames parameter is empty); "
                "ask its administrator to add the cluster",
            )
        elif account != self.account:
            findings.error(
                CLUSTER_CONFIG,
                located.path,
                f"is in account {account}; this Autopilot stack may use only EKS clusters of its own "
                f"account ({self.account})",
            )
        elif not any(fnmatchcase(name, pattern) for pattern in self.names):
            findings.error(
                CLUSTER_CONFIG,
                located.path,
                f"EKS cluster '{name}' is not one of this Autopilot stack's EksClusterNames "
                f"({', '.join(self.names)})",
            )
