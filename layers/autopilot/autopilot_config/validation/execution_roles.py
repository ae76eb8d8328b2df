"""Which execution roles a cluster may use: the stack's ``ExecutionRoleNamePatterns``, its account.

The stack's CreateCluster workflow may pass only such roles (its ``iam:PassRole`` is scoped to
them); refusing others up front names the field instead of failing the workflow minutes later.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from autopilot_config.validation.documents import ARN, ClusterDocuments
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG

DEFAULT_NAME_PATTERNS = ("*HyperPod*", "*hyperpod*")  # template.yaml's ExecutionRoleNamePatterns default


def split_patterns(value: str) -> tuple[str, ...]:
    """``"*HyperPod*,*hyperpod*"`` as the template parameter spells it -> the patterns."""
    return tuple(pattern.strip() for pattern in value.split(",") if pattern.strip())


@dataclass(frozen=True)
class ExecutionRolePolicy:
    """Role *names* must match one of ``name_patterns`` (IAM's ``*`` and ``?`` wildcards, case
    sensitive as IAM is); with ``account`` known, roles must belong to it."""

    name_patterns: tuple[str, ...] = DEFAULT_NAME_PATTERNS
    account: str | None = None

    def check(self, docs: ClusterDocuments, findings: Findings) -> None:
        allowed = ", ".join(self.name_patterns)
        # every role the stack would pass SageMaker: each group's, and the cluster's own ClusterRole
        # (its iam:PassRole is scoped to the same patterns)
        roles = [(f"{group.path}.ExecutionRole", group.spec.get("ExecutionRole")) for group in docs.groups]
        roles.append(("ClusterRole", docs.config.get("ClusterRole")))
        for path, arn in roles:
            if not isinstance(arn, str) or ":role/" not in arn:
                continue  # absent or malformed: the schema has reported it
            match = ARN.match(arn)
            if self.account is not None and match is not None and match.group("account") != self.account:
                findings.error(
                    CLUSTER_CONFIG,
                    path,
                    f"is in account {match.group('account')}; this Autopilot stack passes only roles of "
                    f"its own account ({self.account})",
                )
                continue
            name = arn.rsplit("/", 1)[-1]
            if not any(fnmatchcase(name, pattern) for pattern in self.name_patterns):
                findings.error(
                    CLUSTER_CONFIG,
                    path,
                    f"role name '{name}' does not match the stack's ExecutionRoleNamePatterns ({allowed}); "
                    "Autopilot may pass only those roles to SageMaker",
                )
