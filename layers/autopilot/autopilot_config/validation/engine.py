"""``validate_config``: the one validation engine behind the CLI, the REST API and the workflow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autopilot_config.models.cluster_config import CreateClusterRequest
from autopilot_config.models.provisioning import ProvisioningParameters
from autopilot_config.validation.documents import ClusterDocuments
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG, PROVISIONING_PARAMETERS, ValidationReport
from autopilot_config.validation.rules import run_checks
from autopilot_config.validation.schema import parse_document

if TYPE_CHECKING:
    from autopilot_config.validation.caps import ClusterCaps
    from autopilot_config.validation.eks_clusters import EksClusterPolicy
    from autopilot_config.validation.execution_roles import ExecutionRolePolicy
    from autopilot_config.validation.online import OnlineChecker


def validate_config(
    cluster_config: Mapping[str, Any],
    provisioning_parameters: Mapping[str, Any] | None = None,
    *,
    online: OnlineChecker | None = None,
    region: str | None = None,
    execution_roles: ExecutionRolePolicy | None = None,
    caps: ClusterCaps | None = None,
    eks_clusters: EksClusterPolicy | None = None,
) -> ValidationReport:
    """Check a CreateCluster request (and its Slurm provisioning parameters) and report every problem.

    ``region`` is the region the cluster will be created in; it defaults to ``online.region``.
    Without either, regions are only checked against each other. ``execution_roles`` is the
    stack's policy on ExecutionRole (names, account); ``caps`` its instance count and type limits;
    ``eks_clusters`` the EKS clusters it may orchestrate with.
    ``online`` adds the checks that ask AWS (see
    OnlineChecker). The REST API calls this with its stack's region and policy: it reports exactly
    what ``autopilot validate --region <stack region>`` reports.
    """
    findings = Findings()
    # The models the schema check builds are handed on in the report (POST /clusters creates from them).
    config, problems = parse_document(CreateClusterRequest, cluster_config, CLUSTER_CONFIG)
    findings.extend_errors(problems)
    provisioning: ProvisioningParameters | None = None
    if provisioning_parameters is not None:
        provisioning, problems = parse_document(
            ProvisioningParameters, provisioning_parameters, PROVISIONING_PARAMETERS
        )
        findings.extend_errors(problems)
    if not isinstance(cluster_config, Mapping):
        return findings.report()  # nothing to cross-check; the schema has said what is wrong
    documents = ClusterDocuments(cluster_config, provisioning_parameters)
    run_checks(documents, findings, region or (online.region if online is not None else None))
    if execution_roles is not None:
        execution_roles.check(documents, findings)
    if caps is not None:
        caps.check(documents, findings)
    if eks_clusters is not None:
        eks_clusters.check(documents, findings)
    if online is not None:
        online.check(documents, findings)
    return findings.report(cluster_config=config, provisioning_parameters=provisioning)
