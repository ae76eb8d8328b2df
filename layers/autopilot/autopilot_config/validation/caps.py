"""The stack's cost guardrail on a request: ``MaxInstancesPerCluster`` and ``AllowedInstanceTypes``.

SageMaker's own limits (100 instance groups of up to 6,758 instances each) let one request ask for
675,800 instances; the account's quotas are the only brake, and only once CreateCluster runs. The
stack's caps refuse such a request up front, naming the field, before anything is registered.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from autopilot_config.validation.documents import ClusterDocuments, as_int, as_mapping, as_str, strings
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG

DEFAULT_MAX_INSTANCES = 2000  # template.yaml's MaxInstancesPerCluster default


@dataclass(frozen=True)
class ClusterCaps:
    """At most ``max_instances`` instances in all (every group's ``InstanceCount``, restricted groups
    included), and only the ``allowed_types`` (exact names or ``*`` patterns; empty: every type)."""

    max_instances: int = DEFAULT_MAX_INSTANCES
    allowed_types: tuple[str, ...] = ()

    def check(self, docs: ClusterDocuments, findings: Findings) -> None:
        total = sum(as_int(group.spec.get("InstanceCount")) or 0 for group in docs.groups)
        if total > self.max_instances:
            findings.error(
                CLUSTER_CONFIG,
                "InstanceGroups",
                f"asks for {total} instances in all; this Autopilot stack allows at most "
                f"{self.max_instances} per cluster (MaxInstancesPerCluster)",
            )
        if not self.allowed_types:
            return
        for group in docs.groups:
            located = [(f"{group.path}.InstanceType", as_str(group.spec.get("InstanceType")))]
            requirements = as_mapping(group.spec.get("InstanceRequirements"))
            located += [
                (f"{group.path}.InstanceRequirements.InstanceTypes[{index}]", value)
                for index, value in strings(requirements, "InstanceTypes")
            ]
            for path, value in located:
                if value is not None and not self.allows(value):
                    findings.error(
                        CLUSTER_CONFIG,
                        path,
                        f"'{value}' is not one of this Autopilot stack's AllowedInstanceTypes "
                        f"({', '.join(self.allowed_types)})",
                    )

    def allows(self, instance_type: str) -> bool:
        return not self.allowed_types or any(fnmatchcase(instance_type, p) for p in self.allowed_types)
