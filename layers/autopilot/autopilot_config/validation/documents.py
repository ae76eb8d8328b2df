"""Read-only views over the raw JSON documents, for the checks that go beyond the schema.

The checks read the raw documents rather than parsed models so that a schema error in one field
does not hide every other finding: each accessor yields only values of the expected JSON type and
silently skips the rest (the schema check has already reported those).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from autopilot_config.validation.report import CLUSTER_CONFIG, PROVISIONING_PARAMETERS

FSX_DNS_NAME = re.compile(
    r"(?P<id>(?:fs|fc)-[0-9a-f]{8,17})\.fsx\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?"
)
ARN = re.compile(
    r"arn:(?P<partition>aws[a-z-]*):(?P<service>[a-z0-9-]+):(?P<region>[a-z0-9-]*):(?P<account>\d{12}):"
)


def as_mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int | None:
    # JSON true/false are bools, which Python also counts as ints.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def entries(container: Mapping[str, Any] | None, key: str) -> list[tuple[int, Mapping[str, Any]]]:
    """The objects in the list ``container[key]``, with their indexes."""
    items = container.get(key) if container is not None else None
    if not isinstance(items, list):
        return []
    return [(index, item) for index, item in enumerate(items) if isinstance(item, Mapping)]


def strings(container: Mapping[str, Any] | None, key: str) -> list[tuple[int, str]]:
    """The strings in the list ``container[key]``, with their indexes."""
    items = container.get(key) if container is not None else None
    if not isinstance(items, list):
        return []
    return [(index, item) for index, item in enumerate(items) if isinstance(item, str)]


@dataclass(frozen=True)
class Located:
    """A string value and where it sits."""

    file: str
    path: str
    value: str


@dataclass(frozen=True)
class InstanceGroup:
    path: str  # "InstanceGroups[1]" or "RestrictedInstanceGroups[0]"
    spec: Mapping[str, Any]
    restricted: bool

    @property
    def name(self) -> str | None:
        return as_str(self.spec.get("InstanceGroupName"))

    @property
    def slurm_node_type(self) -> str | None:
        return as_str((as_mapping(self.spec.get("SlurmConfig")) or {}).get("NodeType"))

    @property
    def lifecycle(self) -> Mapping[str, Any] | None:
        return as_mapping(self.spec.get("LifeCycleConfig"))


@dataclass(frozen=True)
class FsxReference:
    """An FSx file system named in either document, with the mount name given next to it (Lustre)."""

    dns_name: Located
    mount_name: Located | None
    file_system_type: str  # "LUSTRE" or "OPENZFS", as FSx DescribeFileSystems spells it

    @property
    def file_system_id(self) -> str | None:
        match = FSX_DNS_NAME.fullmatch(self.dns_name.value)
        return match.group("id") if match else None


class ClusterDocuments:
    """cluster-config.json and (optionally) provisioning-parameters.json, read defensively."""

    def __init__(self, cluster_config: Any, provisioning_parameters: Any | None) -> None:
        self.config: Mapping[str, Any] = as_mapping(cluster_config) or {}
        self.provisioning: Mapping[str, Any] | None = (
            None if provisioning_parameters is None else (as_mapping(provisioning_parameters) or {})
        )

    @cached_property
    def groups(self) -> list[InstanceGroup]:
        regular = [
            InstanceGroup(f"InstanceGroups[{index}]", spec, restricted=False)
            for index, spec in entries(self.config, "InstanceGroups")
        ]
        restricted = [
            InstanceGroup(f"RestrictedInstanceGroups[{index}]", spec, restricted=True)
            for index, spec in entries(self.config, "RestrictedInstanceGroups")
        ]
        return regular + restricted

    @property
    def regular_groups(self) -> list[InstanceGroup]:
        return [group for group in self.groups if not group.restricted]

    def group_named(self, name: str) -> InstanceGroup | None:
        return next((group for group in self.regular_groups if group.name == name), None)

    @property
    def orchestrator(self) -> Mapping[str, Any] | None:
        return as_mapping(self.config.get("Orchestrator"))

    @property
    def eks_cluster_arn(self) -> Located | None:
        eks = as_mapping((self.orchestrator or {}).get("Eks"))
        arn = as_str((eks or {}).get("ClusterArn"))
        return Located(CLUSTER_CONFIG, "Orchestrator.Eks.ClusterArn", arn) if arn is not None else None

    @property
    def is_eks(self) -> bool:
        return as_mapping((self.orchestrator or {}).get("Eks")) is not None

    @property
    def has_slurm_orchestrator(self) -> bool:
        return as_mapping((self.orchestrator or {}).get("Slurm")) is not None

    @property
    def uses_slurm_config(self) -> bool:
        """Slurm roles come from SlurmConfig on the instance groups (not only from provisioning)."""
        return self.has_slurm_orchestrator or any(
            as_mapping(group.spec.get("SlurmConfig")) is not None for group in self.regular_groups
        )

    @property
    def is_classic_slurm(self) -> bool:
        """Slurm set up by lifecycle scripts from provisioning parameters: no orchestrator at all."""
        return not self.is_eks and not self.uses_slurm_config

    def vpc_configs(self) -> list[tuple[str, Mapping[str, Any]]]:
        found: list[tuple[str, Mapping[str, Any]]] = []
        vpc = as_mapping(self.config.get("VpcConfig"))
        if vpc is not None:
            found.append(("VpcConfig", vpc))
        for group in self.groups:
            override = as_mapping(group.spec.get("OverrideVpcConfig"))
            if override is not None:
                found.append((f"{group.path}.OverrideVpcConfig", override))
        return found

    def fsx_references(self) -> list[FsxReference]:
        found: list[FsxReference] = []
        for group in self.groups:
            for index, storage in entries(group.spec, "InstanceStorageConfigs"):
                base = f"{group.path}.InstanceStorageConfigs[{index}]"
                for key, kind in (("FsxLustreConfig", "LUSTRE"), ("FsxOpenZfsConfig", "OPENZFS")):
                    fsx = as_mapping(storage.get(key))
                    dns = as_str((fsx or {}).get("DnsName"))
                    if fsx is None or dns is None:
                        continue
                    mount = as_str(fsx.get("MountName"))
                    found.append(
                        FsxReference(
                            Located(CLUSTER_CONFIG, f"{base}.{key}.DnsName", dns),
                            Located(CLUSTER_CONFIG, f"{base}.{key}.MountName", mount)
                            if mount is not None
                            else None,
                            kind,
                        )
                    )
        dns = as_str((self.provisioning or {}).get("fsx_dns_name"))
        if dns is not None:
            mount = as_str((self.provisioning or {}).get("fsx_mountname"))
            found.append(
                FsxReference(
                    Located(PROVISIONING_PARAMETERS, "fsx_dns_name", dns),
                    Located(PROVISIONING_PARAMETERS, "fsx_mountname", mount) if mount is not None else None,
                    "LUSTRE",
                )
            )
        return found

    def role_arns(self) -> list[Located]:
        found = [
            Located(CLUSTER_CONFIG, f"{group.path}.ExecutionRole", arn)
            for group in self.groups
            if (arn := as_str(group.spec.get("ExecutionRole"))) is not None
        ]
        cluster_role = as_str(self.config.get("ClusterRole"))
        if cluster_role is not None:
            found.append(Located(CLUSTER_CONFIG, "ClusterRole", cluster_role))
        return found

    def arns(self) -> list[Located]:
        """Every ARN that pins the cluster to an account or a region."""
        found = []
        if (eks := self.eks_cluster_arn) is not None:
            found.append(eks)
        found.extend(self.role_arns())
        for group in self.groups:
            plan = as_str(group.spec.get("TrainingPlanArn"))
            if plan is not None:
                found.append(Located(CLUSTER_CONFIG, f"{group.path}.TrainingPlanArn", plan))
        slurm = as_mapping((self.orchestrator or {}).get("Slurm"))
        database = as_mapping((slurm or {}).get("AccountingDatabase"))
        secret = as_str((database or {}).get("SecretArn"))
        if secret is not None:
            found.append(Located(CLUSTER_CONFIG, "Orchestrator.Slurm.AccountingDatabase.SecretArn", secret))
        return found


def parse_s3_uri(uri: str) -> tuple[str, str] | None:
    """``s3://bucket/prefix/`` -> ``("bucket", "prefix/")``; None when it is not an s3:// URI."""
    if not uri.startswith("s3://"):
        return None
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    return (bucket, prefix) if bucket else None


def s3_key(prefix: str, file_name: str) -> str:
    if not prefix or prefix.endswith("/"):
        return prefix + file_name
    return f"{prefix}/{file_name}"
