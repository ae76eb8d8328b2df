"""Checks across fields and across the two files: what the schema alone cannot see.

Each check reads the raw documents (see documents.py) and reports into ``Findings``; every check
runs whatever the others found. docs/validation.md lists them with their messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from autopilot_config.models.cluster_config import INSTANCE_TYPE_PATTERN
from autopilot_config.models.instance_types import BOTOCORE_VERSION, CLUSTER_INSTANCE_TYPES
from autopilot_config.models.provisioning import KNOWN_KEYS, KNOWN_WORKER_GROUP_KEYS
from autopilot_config.validation.documents import (
    ARN,
    FSX_DNS_NAME,
    ClusterDocuments,
    InstanceGroup,
    Located,
    as_int,
    as_mapping,
    as_str,
    entries,
    parse_s3_uri,
    strings,
)
from autopilot_config.validation.findings import Findings
from autopilot_config.validation.report import CLUSTER_CONFIG, PROVISIONING_PARAMETERS

C, P = CLUSTER_CONFIG, PROVISIONING_PARAMETERS

_INSTANCE_TYPE = re.compile(INSTANCE_TYPE_PATTERN)
_AWS_ID = re.compile(r"[-0-9a-zA-Z]+")  # botocore's SubnetId / SecurityGroupId pattern
_SUBNET_ID = re.compile(r"subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_SECURITY_GROUP_ID = re.compile(r"sg-[0-9a-f]{8}(?:[0-9a-f]{9})?")
_FSX_DNS_SCHEMA = re.compile(r"((fs|fc)i?-[0-9a-f]{8,}\..{4,253})")  # botocore's ClusterDnsName
_BUCKET_NAME = re.compile(r"(?!xn--)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
SCRIPT_HINT = "must be a script file name relative to SourceS3Uri (e.g. on_create.sh)"


# What Autopilot itself needs beyond a CreateCluster request SageMaker accepts: POST /clusters and
# `autopilot validate` report these alike (one rule set).
AUTOPILOT_NEEDS_INSTANCE_GROUPS = "required by Autopilot: Autopilot creates clusters from instance groups"
# AWS's own examples leave these out; SageMaker then applies its defaults, and Autopilot says what follows.
NO_VPC_WARNING = (
    "not given: the nodes run in a VPC SageMaker manages, so they reach nothing of yours (no FSx, EFA "
    "between groups or private endpoints); Autopilot has no network interfaces to tag"
)
NO_NODE_RECOVERY_WARNING = (
    "not given: SageMaker's default, Automatic, applies: HyperPod reboots or replaces faulty nodes "
    "itself and Autopilot steps in only if it has not within HyperPodRepairDeadlineMinutes; say "
    "Automatic or None to choose"
)

# botocore's documentation of CreateCluster's NodeProvisioningMode: "This mode is only supported for EKS
# orchestrated clusters." (The developer guide has a page on Continuous for Slurm; docs/validation.md.)
CONTINUOUS_NEEDS_EKS = (
    "Continuous is only supported for a cluster orchestrated by EKS (Orchestrator.Eks), as SageMaker's "
    "API reference says"
)


def check_instance_groups(docs: ClusterDocuments, findings: Findings) -> None:
    if "InstanceGroups" not in docs.config:
        if "RestrictedInstanceGroups" in docs.config:
            findings.error(C, "InstanceGroups", AUTOPILOT_NEEDS_INSTANCE_GROUPS)
        else:
            findings.error(C, "InstanceGroups", "is required: a cluster needs at least one instance group")
    first_use: dict[str, str] = {}
    for group in docs.groups:
        name = group.name
        if name is None:
            continue
        if name in first_use:
            findings.error(
                C,
                f"{group.path}.InstanceGroupName",
                f"duplicate instance group name '{name}' (also {first_use[name]})",
            )
        else:
            first_use[name] = group.path
    for group in docs.regular_groups:
        _check_instance_type_choice(group, findings)
        count, minimum = as_int(group.spec.get("InstanceCount")), as_int(group.spec.get("MinInstanceCount"))
        if count is not None and minimum is not None and minimum > count:
            findings.error(C, f"{group.path}.MinInstanceCount", f"must not exceed InstanceCount ({count})")


def _check_instance_type_choice(group: InstanceGroup, findings: Findings) -> None:
    has_type = "InstanceType" in group.spec
    has_requirements = "InstanceRequirements" in group.spec
    if not has_type and not has_requirements:
        findings.error(C, f"{group.path}.InstanceType", "is required (or InstanceRequirements)")
    elif has_type and has_requirements:
        findings.error(
            C,
            f"{group.path}.InstanceRequirements",
            "set either InstanceType or InstanceRequirements, not both",
        )


def check_instance_types(docs: ClusterDocuments, findings: Findings) -> None:
    for group in docs.groups:
        located = [(f"{group.path}.InstanceType", as_str(group.spec.get("InstanceType")))]
        requirements = as_mapping(group.spec.get("InstanceRequirements"))
        located += [
            (f"{group.path}.InstanceRequirements.InstanceTypes[{index}]", value)
            for index, value in strings(requirements, "InstanceTypes")
        ]
        for path, value in located:
            # A malformed type is a schema error already; this catches well-formed typos and new types.
            if value is not None and _INSTANCE_TYPE.fullmatch(value) and value not in CLUSTER_INSTANCE_TYPES:
                findings.warning(
                    C,
                    path,
                    f"'{value}' is not a HyperPod instance type known to botocore {BOTOCORE_VERSION}; "
                    "check the spelling",
                )


def check_lifecycle(docs: ClusterDocuments, findings: Findings) -> None:
    warned_buckets: set[str] = set()
    for group in docs.regular_groups:
        lifecycle = group.lifecycle
        base = f"{group.path}.LifeCycleConfig"
        if lifecycle is None:
            if docs.is_classic_slurm and "LifeCycleConfig" not in group.spec:
                findings.warning(
                    C, base, "is not set: without lifecycle scripts nothing sets up Slurm on these nodes"
                )
            continue
        uri = as_str(lifecycle.get("SourceS3Uri"))
        scripts = [(key, as_str(lifecycle.get(key))) for key in ("OnCreate", "OnInitComplete")]
        if uri is not None:
            bucket = _check_source_uri(uri, f"{base}.SourceS3Uri", findings)
            if bucket is not None and not bucket.startswith("sagemaker-") and bucket not in warned_buckets:
                warned_buckets.add(bucket)
                findings.warning(
                    C,
                    f"{base}.SourceS3Uri",
                    f"bucket '{bucket}' does not start with 'sagemaker-': the managed policy "
                    "AmazonSageMakerClusterInstanceRolePolicy only reads sagemaker-* buckets, so the "
                    "execution role needs its own s3:GetObject permission",
                )
        for key, script in scripts:
            if script is not None and not _is_script_name(script):
                findings.error(C, f"{base}.{key}", SCRIPT_HINT)
        named = [key for key, script in scripts if script is not None]
        if named and "SourceS3Uri" not in lifecycle:
            findings.error(C, f"{base}.SourceS3Uri", f"is required: HyperPod downloads {named[0]} from it")
        if uri is not None and not any(key in lifecycle for key, _ in scripts):
            findings.error(
                C, f"{base}.OnCreate", "is required: name the script in SourceS3Uri that HyperPod runs"
            )


def _check_source_uri(uri: str, path: str, findings: Findings) -> str | None:
    """The bucket of a well-formed s3:// URI; reports the URIs HyperPod cannot read scripts from."""
    if uri.startswith("https://"):
        findings.error(C, path, "must be an s3:// URI (s3://bucket/prefix/); HyperPod does not read https://")
        return None
    parsed = parse_s3_uri(uri)
    if parsed is None:
        return None  # the schema pattern has reported it
    bucket = parsed[0]
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
        findings.error(C, path, f"'{bucket}' is not a valid S3 bucket name")
        return None
    return bucket


def _is_script_name(name: str) -> bool:
    return name == name.strip() and "://" not in name and not name.startswith("/") and not name.endswith("/")


_VPC_IDS = {
    "Subnets": (_SUBNET_ID, "subnet ID (subnet-0123456789abcdef0)"),
    "SecurityGroupIds": (_SECURITY_GROUP_ID, "security group ID (sg-0123456789abcdef0)"),
}


def check_vpc(docs: ClusterDocuments, findings: Findings) -> None:
    for base, vpc in docs.vpc_configs():
        for key, (shape, noun) in _VPC_IDS.items():
            seen: dict[str, int] = {}
            for index, value in strings(vpc, key):
                path = f"{base}.{key}[{index}]"
                # Values outside botocore's pattern are schema errors already.
                if _AWS_ID.fullmatch(value) and not shape.fullmatch(value):
                    findings.error(C, path, f"'{value}' is not a {noun}")
                if value in seen:
                    findings.error(C, path, f"'{value}' is listed twice (also {base}.{key}[{seen[value]}])")
                else:
                    seen[value] = index
    if "VpcConfig" in docs.config:
        return
    if docs.is_eks:
        findings.error(C, "VpcConfig", "is required for a cluster orchestrated by EKS")
    elif fsx := docs.fsx_references():
        findings.error(
            C,
            "VpcConfig",
            f"is required: the nodes reach the FSx file system ({fsx[0].dns_name.path}) through your VPC",
        )
    else:
        findings.warning(C, "VpcConfig", NO_VPC_WARNING)


def check_node_recovery(docs: ClusterDocuments, findings: Findings) -> None:
    if "NodeRecovery" not in docs.config:
        findings.warning(C, "NodeRecovery", NO_NODE_RECOVERY_WARNING)


def check_orchestrator(docs: ClusterDocuments, findings: Findings) -> None:
    orchestrator = docs.orchestrator
    if orchestrator is not None:
        has_eks, has_slurm = "Eks" in orchestrator, "Slurm" in orchestrator
        if has_eks and has_slurm:
            findings.error(C, "Orchestrator", "set either Eks or Slurm, not both")
        elif not has_eks and not has_slurm:
            findings.error(C, "Orchestrator", "must set Eks or Slurm")
    for group in docs.groups:
        if docs.is_eks and "SlurmConfig" in group.spec:
            findings.error(
                C, f"{group.path}.SlurmConfig", "is only valid for a Slurm cluster (Orchestrator.Eks is set)"
            )
        if not docs.is_eks and "KubernetesConfig" in group.spec:
            findings.error(
                C,
                f"{group.path}.KubernetesConfig",
                "is only valid for a cluster orchestrated by EKS (Orchestrator.Eks)",
            )
    autoscaling = as_mapping(docs.config.get("AutoScaling"))
    if autoscaling is not None and autoscaling.get("Mode") == "Enable" and not docs.is_eks:
        findings.error(C, "AutoScaling.Mode", "autoscaling (Karpenter) needs a cluster orchestrated by EKS")
    if docs.config.get("NodeProvisioningMode") == "Continuous" and not docs.is_eks:
        findings.error(C, "NodeProvisioningMode", CONTINUOUS_NEEDS_EKS)


def check_slurm_roles(docs: ClusterDocuments, findings: Findings) -> None:
    """A Slurm cluster has exactly one controller group, named by SlurmConfig or provisioning parameters."""
    if docs.is_eks:
        return
    if docs.uses_slurm_config:
        controllers: list[InstanceGroup] = []
        for group in docs.regular_groups:
            if docs.has_slurm_orchestrator and "SlurmConfig" not in group.spec:
                findings.error(
                    C,
                    f"{group.path}.SlurmConfig",
                    "is required when Orchestrator.Slurm is set (NodeType Controller, Login or Compute)",
                )
            if group.slurm_node_type == "Controller":
                if controllers:
                    findings.error(
                        C,
                        f"{group.path}.SlurmConfig.NodeType",
                        f"a Slurm cluster has exactly one controller group, and {controllers[0].path} "
                        "is already one",
                    )
                controllers.append(group)
        if not controllers and docs.regular_groups:
            findings.error(
                C,
                "InstanceGroups",
                "a Slurm cluster needs exactly one controller group (SlurmConfig.NodeType Controller); "
                "none is set",
            )
        _check_controller_count(controllers[:1], findings)
    elif docs.provisioning is None and docs.regular_groups:
        findings.warning(
            P,
            "",
            "not given: the Slurm controller, login and worker groups were not checked "
            "against InstanceGroups",
        )
    if docs.provisioning is not None:
        controller = as_str(docs.provisioning.get("controller_group"))
        named = docs.group_named(controller) if controller is not None else None
        _check_controller_count([named] if named is not None else [], findings)


def _check_controller_count(controllers: list[InstanceGroup], findings: Findings) -> None:
    for group in controllers:
        if as_int(group.spec.get("InstanceCount")) == 0:
            findings.error(
                C, f"{group.path}.InstanceCount", "the Slurm controller group needs at least 1 instance"
            )


def check_provisioning(docs: ClusterDocuments, findings: Findings) -> None:
    provisioning = docs.provisioning
    if provisioning is None:
        return
    for key in provisioning:
        if key not in KNOWN_KEYS:
            findings.warning(P, key, "unknown field (the workshop lifecycle scripts ignore it)")
    for index, worker in entries(provisioning, "worker_groups"):
        for key in worker:
            if key not in KNOWN_WORKER_GROUP_KEYS:
                findings.warning(
                    P,
                    f"worker_groups[{index}].{key}",
                    "unknown field (the workshop lifecycle scripts ignore it)",
                )
    if docs.is_eks:
        if provisioning.get("workload_manager") == "slurm":
            findings.error(
                P,
                "workload_manager",
                "is 'slurm' but cluster-config.json is orchestrated by EKS (Orchestrator.Eks)",
            )
        return
    _check_provisioning_groups(docs, provisioning, findings)


def _check_provisioning_groups(docs: ClusterDocuments, params: Mapping[str, Any], findings: Findings) -> None:
    names = [group.name for group in docs.regular_groups if group.name is not None]
    listing = ", ".join(names) if names else "none"

    def check_exists(path: str, name: str) -> InstanceGroup | None:
        group = docs.group_named(name)
        if group is None:
            findings.error(
                P, path, f"'{name}' is not an instance group in cluster-config.json (groups: {listing})"
            )
        return group

    roles: dict[str, tuple[str, str]] = {}  # group name -> (path in provisioning, expected NodeType)
    controller = as_str(params.get("controller_group"))
    if controller is not None:
        check_exists("controller_group", controller)
        roles[controller] = ("controller_group", "Controller")
    login = as_str(params.get("login_group"))
    if login is not None:
        check_exists("login_group", login)
        if login == controller:
            findings.error(P, "login_group", f"'{login}' is the controller_group; use a separate login group")
        else:
            roles[login] = ("login_group", "Login")
    partitions: dict[str, str] = {}
    for index, worker in entries(params, "worker_groups"):
        base = f"worker_groups[{index}]"
        name = as_str(worker.get("instance_group_name"))
        if name is not None:
            check_exists(f"{base}.instance_group_name", name)
            if name in roles:
                where, _ = roles[name]
                message = (
                    f"'{name}' is already listed at {where}"
                    if where.startswith("worker_groups")
                    else f"'{name}' is the {where}; it cannot also be a worker group"
                )
                findings.error(P, f"{base}.instance_group_name", message)
            else:
                roles[name] = (f"{base}.instance_group_name", "Compute")
        partition = as_str(worker.get("partition_name"))
        if partition is not None:
            if partition in partitions:
                findings.error(
                    P,
                    f"{base}.partition_name",
                    f"duplicate partition name '{partition}' (also {partitions[partition]})",
                )
            else:
                partitions[partition] = f"{base}.partition_name"
    for group in docs.regular_groups:
        if group.name is None:
            continue
        if group.name not in roles:
            findings.warning(
                C,
                f"{group.path}.InstanceGroupName",
                f"'{group.name}' is not in provisioning-parameters.json (controller_group, login_group "
                "or worker_groups): Slurm will not use its nodes",
            )
            continue
        where, expected = roles[group.name]
        node_type = group.slurm_node_type
        if node_type is not None and node_type != expected:
            findings.error(
                C,
                f"{group.path}.SlurmConfig.NodeType",
                f"is '{node_type}' but provisioning-parameters.json names this group at {where} ({expected})",
            )


def check_tags(docs: ClusterDocuments, findings: Findings) -> None:
    first_use: dict[str, int] = {}
    for index, tag in entries(docs.config, "Tags"):
        key = as_str(tag.get("Key"))
        if key is None:
            continue
        path = f"Tags[{index}].Key"
        if key.lower().startswith("aws:"):
            findings.error(C, path, "tag keys starting with 'aws:' are reserved for AWS")
        if key in first_use:
            findings.error(C, path, f"duplicate tag key '{key}' (also Tags[{first_use[key]}])")
        else:
            first_use[key] = index


def check_accounts(docs: ClusterDocuments, findings: Findings) -> None:
    """A cluster, its roles, EKS cluster and training plans live in one account."""
    reference: tuple[str, Located] | None = None
    for located in docs.arns():
        match = ARN.match(located.value)
        if match is None:
            continue
        account = match.group("account")
        if reference is None:
            reference = (account, located)
        elif account != reference[0]:
            findings.error(
                located.file,
                located.path,
                f"is in account {account} but {reference[1].path} is in account {reference[0]}; "
                "a cluster's resources belong to one account",
            )


def check_regions(docs: ClusterDocuments, findings: Findings, region: str | None) -> None:
    """The EKS cluster, FSx file systems, training plans and secrets must be in the cluster's region."""
    located: list[tuple[str, Located]] = []
    for arn in docs.arns():
        match = ARN.match(arn.value)
        if match is not None and match.group("region"):
            located.append((match.group("region"), arn))
    for fsx in docs.fsx_references():
        dns = FSX_DNS_NAME.fullmatch(fsx.dns_name.value)
        if dns is not None:
            located.append((dns.group("region"), fsx.dns_name))
    reference: tuple[str, str] | None = (region, f"the cluster's region is {region}") if region else None
    for found, where in located:
        if reference is None:
            reference = (found, f"{where.path} is in {found}")
        elif found != reference[0]:
            findings.error(where.file, where.path, f"is in {found} but {reference[1]}")


def check_fsx_names(docs: ClusterDocuments, findings: Findings) -> None:
    for fsx in docs.fsx_references():
        dns = fsx.dns_name
        if _FSX_DNS_SCHEMA.fullmatch(dns.value) and not FSX_DNS_NAME.fullmatch(dns.value):
            findings.error(
                dns.file,
                dns.path,
                "must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
            )
    provisioning = docs.provisioning or {}
    has_dns, has_mount = "fsx_dns_name" in provisioning, "fsx_mountname" in provisioning
    if has_dns and not has_mount:
        findings.error(P, "fsx_mountname", "is required when fsx_dns_name is set")
    if has_mount and not has_dns:
        findings.error(P, "fsx_dns_name", "is required when fsx_mountname is set")


Check = Callable[[ClusterDocuments, Findings], None]

CHECKS: tuple[Check, ...] = (
    check_instance_groups,
    check_instance_types,
    check_lifecycle,
    check_vpc,
    check_node_recovery,
    check_orchestrator,
    check_slurm_roles,
    check_provisioning,
    check_tags,
    check_accounts,
    check_fsx_names,
)


def run_checks(docs: ClusterDocuments, findings: Findings, region: str | None) -> None:
    for check in CHECKS:
        check(docs, findings)
    check_regions(docs, findings, region)
