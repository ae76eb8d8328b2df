"""Cross-field and cross-file checks: one failure case per rule, built from the valid fixtures."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot_config.validation import CLUSTER_CONFIG, PROVISIONING_PARAMETERS, validate_config
from autopilot_config.validation.rules import CONTINUOUS_NEEDS_EKS, NO_NODE_RECOVERY_WARNING, NO_VPC_WARNING

from tests.unit.validation.builders import (
    REGION,
    changed,
    eks_config,
    errors,
    messages_at,
    slurm_config,
    slurm_provisioning,
    warnings,
    without,
)

C, P = CLUSTER_CONFIG, PROVISIONING_PARAMETERS
ROLE = "arn:aws:iam::123456789012:role/sagemaker-hyperpod-execution-role"
FSX = "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"


def check(
    config: dict[str, Any], provisioning: dict[str, Any] | None = None, region: str | None = REGION
) -> Any:
    return validate_config(config, provisioning, region=region)


def check_slurm(config: dict[str, Any] | None = None, provisioning: dict[str, Any] | None = None) -> Any:
    return check(config or slurm_config(), provisioning or slurm_provisioning())


def managed_slurm_config() -> dict[str, Any]:
    """The Slurm fixture with roles set on the instance groups (Orchestrator.Slurm + SlurmConfig)."""
    return changed(
        slurm_config(),
        ("Orchestrator", {"Slurm": {"SlurmConfigStrategy": "Managed"}}),
        ("InstanceGroups[0].SlurmConfig", {"NodeType": "Controller"}),
        ("InstanceGroups[1].SlurmConfig", {"NodeType": "Login"}),
        ("InstanceGroups[2].SlurmConfig", {"NodeType": "Compute", "PartitionNames": ["gpu"]}),
    )


# -- the valid workshop configs ------------------------------------------------------------------------
def test_the_workshop_slurm_config_is_valid_without_warnings() -> None:
    report = check_slurm()
    assert (report.valid, report.errors, report.warnings) == (True, [], [])


def test_the_workshop_eks_config_is_valid_without_warnings() -> None:
    report = check(eks_config())
    assert (report.valid, report.errors, report.warnings) == (True, [], [])


def test_a_slurm_cluster_with_slurm_config_on_its_groups_is_valid() -> None:
    assert check(managed_slurm_config()).errors == []


# -- instance groups -----------------------------------------------------------------------------------
def test_a_cluster_needs_instance_groups() -> None:
    assert (C, "InstanceGroups", "is required: a cluster needs at least one instance group") in errors(
        check_slurm(without(slurm_config(), "InstanceGroups"))
    )


def test_instance_group_names_are_unique() -> None:
    report = check_slurm(
        changed(slurm_config(), ("InstanceGroups[2].InstanceGroupName", "controller-machine"))
    )
    assert messages_at(errors(report), "InstanceGroups[2].InstanceGroupName") == [
        "duplicate instance group name 'controller-machine' (also InstanceGroups[0])"
    ]


def test_a_group_names_an_instance_type_or_instance_requirements() -> None:
    none = check_slurm(without(slurm_config(), "InstanceGroups[1].InstanceType"))
    assert messages_at(errors(none), "InstanceGroups[1].InstanceType") == [
        "is required (or InstanceRequirements)"
    ]
    both = check_slurm(
        changed(
            slurm_config(), ("InstanceGroups[1].InstanceRequirements", {"InstanceTypes": ["ml.m5.4xlarge"]})
        )
    )
    assert messages_at(errors(both), "InstanceGroups[1].InstanceRequirements") == [
        "set either InstanceType or InstanceRequirements, not both"
    ]


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ("InstanceGroups[2].InstanceType", "ml.p5.48xlarg", "InstanceGroups[2].InstanceType"),
        (
            "InstanceGroups[2].InstanceRequirements",
            {"InstanceTypes": ["ml.p5.48xlarge", "ml.p9.48xlarge"]},
            "InstanceGroups[2].InstanceRequirements.InstanceTypes[1]",
        ),
    ],
)
def test_an_instance_type_botocore_does_not_know_is_a_warning(path: str, value: Any, where: str) -> None:
    config = changed(slurm_config(), (path, value))
    if "InstanceRequirements" in path:
        config = without(config, "InstanceGroups[2].InstanceType")
    report = check_slurm(config)
    assert report.valid
    [message] = messages_at(warnings(report), where)
    assert message.startswith("'ml.p")
    assert "is not a HyperPod instance type known to botocore" in message


def test_min_instance_count_cannot_exceed_instance_count() -> None:
    report = check_slurm(changed(slurm_config(), ("InstanceGroups[2].MinInstanceCount", 5)))
    assert messages_at(errors(report), "InstanceGroups[2].MinInstanceCount") == [
        "must not exceed InstanceCount (4)"
    ]


# -- lifecycle scripts ---------------------------------------------------------------------------------
LIFECYCLE = "InstanceGroups[0].LifeCycleConfig"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        (
            "https://sagemaker-lc.s3.amazonaws.com/src/",
            "must be an s3:// URI (s3://bucket/prefix/); HyperPod does not read https://",
        ),
        ("s3://Sagemaker_Bucket/src/", "'Sagemaker_Bucket' is not a valid S3 bucket name"),
        ("s3://sagemaker..lc/src/", "'sagemaker..lc' is not a valid S3 bucket name"),
    ],
)
def test_the_lifecycle_source_is_an_s3_uri_with_a_valid_bucket(uri: str, message: str) -> None:
    report = check_slurm(changed(slurm_config(), (f"{LIFECYCLE}.SourceS3Uri", uri)))
    assert messages_at(errors(report), f"{LIFECYCLE}.SourceS3Uri") == [message]


def test_a_bucket_outside_the_managed_policy_is_one_warning() -> None:
    config = slurm_config()
    for index in range(3):
        config = changed(
            config, (f"InstanceGroups[{index}].LifeCycleConfig.SourceS3Uri", "s3://my-scripts/src/")
        )
    report = check_slurm(config)
    assert report.valid
    assert warnings(report) == [
        (
            C,
            f"{LIFECYCLE}.SourceS3Uri",
            "bucket 'my-scripts' does not start with 'sagemaker-': the managed policy "
            "AmazonSageMakerClusterInstanceRolePolicy only reads sagemaker-* buckets, so the execution role "
            "needs its own s3:GetObject permission",
        )
    ]


@pytest.mark.parametrize(
    "script", ["/on_create.sh", "s3://sagemaker-lc/src/on_create.sh", "scripts/", " on_create.sh"]
)
def test_on_create_is_a_script_file_name(script: str) -> None:
    report = check_slurm(changed(slurm_config(), (f"{LIFECYCLE}.OnCreate", script)))
    assert messages_at(errors(report), f"{LIFECYCLE}.OnCreate") == [
        "must be a script file name relative to SourceS3Uri (e.g. on_create.sh)"
    ]


def test_a_lifecycle_config_names_both_source_and_script() -> None:
    no_source = check_slurm(without(slurm_config(), f"{LIFECYCLE}.SourceS3Uri"))
    assert messages_at(errors(no_source), f"{LIFECYCLE}.SourceS3Uri") == [
        "is required: HyperPod downloads OnCreate from it"
    ]
    no_script = check_slurm(without(slurm_config(), f"{LIFECYCLE}.OnCreate"))
    assert messages_at(errors(no_script), f"{LIFECYCLE}.OnCreate") == [
        "is required: name the script in SourceS3Uri that HyperPod runs"
    ]


def test_a_slurm_group_without_lifecycle_scripts_is_a_warning() -> None:
    report = check_slurm(without(slurm_config(), LIFECYCLE))
    assert messages_at(warnings(report), LIFECYCLE) == [
        "is not set: without lifecycle scripts nothing sets up Slurm on these nodes"
    ]


# -- VPC -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("VpcConfig.Subnets[0]", "subnet-123", "'subnet-123' is not a subnet ID (subnet-0123456789abcdef0)"),
        (
            "VpcConfig.SecurityGroupIds[0]",
            "sgr-0123456789abcdef0",
            "'sgr-0123456789abcdef0' is not a security group ID (sg-0123456789abcdef0)",
        ),
    ],
)
def test_vpc_ids_have_the_ec2_shape(path: str, value: str, message: str) -> None:
    assert messages_at(errors(check_slurm(changed(slurm_config(), (path, value)))), path) == [message]


def test_every_vpc_config_is_checked_including_overrides_and_duplicates() -> None:
    override = {
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
        "Subnets": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef0", "subnet-1"],
    }
    report = check_slurm(changed(slurm_config(), ("InstanceGroups[2].OverrideVpcConfig", override)))
    base = "InstanceGroups[2].OverrideVpcConfig.Subnets"
    assert messages_at(errors(report), f"{base}[1]") == [
        "'subnet-0123456789abcdef0' is listed twice (also InstanceGroups[2].OverrideVpcConfig.Subnets[0])"
    ]
    assert messages_at(errors(report), f"{base}[2]") == [
        "'subnet-1' is not a subnet ID (subnet-0123456789abcdef0)"
    ]


def test_an_eks_cluster_needs_a_vpc_config() -> None:
    assert messages_at(errors(check(without(eks_config(), "VpcConfig"))), "VpcConfig") == [
        "is required for a cluster orchestrated by EKS"
    ]


def test_a_slurm_cluster_with_fsx_needs_a_vpc_config_and_one_without_is_warned() -> None:
    with_fsx = check_slurm(without(slurm_config(), "VpcConfig"))
    assert messages_at(errors(with_fsx), "VpcConfig") == [
        "is required: the nodes reach the FSx file system (fsx_dns_name) through your VPC"
    ]
    no_fsx = without(slurm_provisioning(), "fsx_dns_name", "fsx_mountname")
    report = check_slurm(without(slurm_config(), "VpcConfig"), no_fsx)
    assert errors(report) == []  # as SageMaker: AWS's own examples leave it out
    assert messages_at(warnings(report), "VpcConfig") == [NO_VPC_WARNING]


def test_no_node_recovery_is_sagemakers_default_with_a_warning() -> None:
    report = check_slurm(without(slurm_config(), "NodeRecovery"))
    assert errors(report) == []
    assert messages_at(warnings(report), "NodeRecovery") == [NO_NODE_RECOVERY_WARNING]


# -- orchestrator --------------------------------------------------------------------------------------
def test_the_orchestrator_is_eks_or_slurm() -> None:
    both = check(changed(eks_config(), ("Orchestrator.Slurm", {})))
    assert messages_at(errors(both), "Orchestrator") == ["set either Eks or Slurm, not both"]
    neither = check(changed(eks_config(), ("Orchestrator", {})))
    assert messages_at(errors(neither), "Orchestrator") == ["must set Eks or Slurm"]


def test_slurm_config_belongs_to_slurm_and_kubernetes_config_to_eks() -> None:
    eks = check(changed(eks_config(), ("InstanceGroups[0].SlurmConfig", {"NodeType": "Compute"})))
    assert messages_at(errors(eks), "InstanceGroups[0].SlurmConfig") == [
        "is only valid for a Slurm cluster (Orchestrator.Eks is set)"
    ]
    slurm = check_slurm(
        changed(slurm_config(), ("InstanceGroups[2].KubernetesConfig", {"Labels": {"a": "b"}}))
    )
    assert messages_at(errors(slurm), "InstanceGroups[2].KubernetesConfig") == [
        "is only valid for a cluster orchestrated by EKS (Orchestrator.Eks)"
    ]


def test_autoscaling_needs_eks() -> None:
    config = changed(slurm_config(), ("AutoScaling", {"Mode": "Enable", "AutoScalerType": "Karpenter"}))
    assert messages_at(errors(check_slurm(config)), "AutoScaling.Mode") == [
        "autoscaling (Karpenter) needs a cluster orchestrated by EKS"
    ]
    assert check(changed(eks_config(), ("AutoScaling", {"Mode": "Enable"}))).errors == []


def test_continuous_provisioning_needs_eks() -> None:
    """botocore on NodeProvisioningMode Continuous: "only supported for EKS orchestrated clusters"."""
    slurm = check_slurm(changed(slurm_config(), ("NodeProvisioningMode", "Continuous")))
    assert messages_at(errors(slurm), "NodeProvisioningMode") == [CONTINUOUS_NEEDS_EKS]
    managed = check_slurm(changed(managed_slurm_config(), ("NodeProvisioningMode", "Continuous")))
    assert messages_at(errors(managed), "NodeProvisioningMode") == [CONTINUOUS_NEEDS_EKS]
    assert check(changed(eks_config(), ("NodeProvisioningMode", "Continuous"))).errors == []


def test_an_eks_cluster_rejects_slurm_provisioning_parameters() -> None:
    report = check(eks_config(), slurm_provisioning())
    assert errors(report) == [
        (
            P,
            "workload_manager",
            "is 'slurm' but cluster-config.json is orchestrated by EKS (Orchestrator.Eks)",
        )
    ]


# -- Slurm roles ---------------------------------------------------------------------------------------
def test_a_slurm_cluster_has_exactly_one_controller_group() -> None:
    two = check(changed(managed_slurm_config(), ("InstanceGroups[1].SlurmConfig.NodeType", "Controller")))
    assert messages_at(errors(two), "InstanceGroups[1].SlurmConfig.NodeType") == [
        "a Slurm cluster has exactly one controller group, and InstanceGroups[0] is already one"
    ]
    none = check(changed(managed_slurm_config(), ("InstanceGroups[0].SlurmConfig.NodeType", "Compute")))
    assert messages_at(errors(none), "InstanceGroups") == [
        "a Slurm cluster needs exactly one controller group (SlurmConfig.NodeType Controller); none is set"
    ]


def test_with_a_slurm_orchestrator_every_group_has_slurm_config() -> None:
    report = check(without(managed_slurm_config(), "InstanceGroups[1].SlurmConfig"))
    assert messages_at(errors(report), "InstanceGroups[1].SlurmConfig") == [
        "is required when Orchestrator.Slurm is set (NodeType Controller, Login or Compute)"
    ]


@pytest.mark.parametrize("use_slurm_config", [True, False])
def test_the_controller_group_needs_an_instance(use_slurm_config: bool) -> None:
    config = managed_slurm_config() if use_slurm_config else slurm_config()
    report = check(changed(config, ("InstanceGroups[0].InstanceCount", 0)), slurm_provisioning())
    assert messages_at(errors(report), "InstanceGroups[0].InstanceCount") == [
        "the Slurm controller group needs at least 1 instance"
    ]


def test_a_slurm_cluster_without_provisioning_parameters_is_not_cross_checked() -> None:
    report = check(slurm_config())
    assert report.valid
    assert warnings(report) == [
        (
            P,
            "",
            "not given: the Slurm controller, login and worker groups were not checked "
            "against InstanceGroups",
        )
    ]


# -- provisioning parameters against the instance groups ------------------------------------------------
GROUPS = "groups: controller-machine, login-group, worker-group-1"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "controller_group",
            "head-node",
            f"'head-node' is not an instance group in cluster-config.json ({GROUPS})",
        ),
        ("login_group", "login", f"'login' is not an instance group in cluster-config.json ({GROUPS})"),
        (
            "worker_groups[0].instance_group_name",
            "compute-nodes",
            f"'compute-nodes' is not an instance group in cluster-config.json ({GROUPS})",
        ),
        (
            "worker_groups[0].instance_group_name",
            "controller-machine",
            "'controller-machine' is the controller_group; it cannot also be a worker group",
        ),
        (
            "worker_groups[0].instance_group_name",
            "login-group",
            "'login-group' is the login_group; it cannot also be a worker group",
        ),
        (
            "login_group",
            "controller-machine",
            "'controller-machine' is the controller_group; use a separate login group",
        ),
    ],
)
def test_every_provisioning_group_is_an_instance_group_with_one_role(
    path: str, value: str, message: str
) -> None:
    report = check_slurm(provisioning=changed(slurm_provisioning(), (path, value)))
    assert message in messages_at(errors(report), path)


def test_worker_groups_and_partitions_are_not_listed_twice() -> None:
    second = {"instance_group_name": "worker-group-1", "partition_name": "ml.p5.48xlarge"}
    provisioning = changed(
        slurm_provisioning(), ("worker_groups", [*slurm_provisioning()["worker_groups"], second])
    )
    report = check_slurm(provisioning=provisioning)
    assert messages_at(errors(report), "worker_groups[1].instance_group_name") == [
        "'worker-group-1' is already listed at worker_groups[0].instance_group_name"
    ]
    assert messages_at(errors(report), "worker_groups[1].partition_name") == [
        "duplicate partition name 'ml.p5.48xlarge' (also worker_groups[0].partition_name)"
    ]


def test_an_instance_group_slurm_does_not_use_is_a_warning() -> None:
    report = check_slurm(provisioning=without(slurm_provisioning(), "login_group"))
    assert report.valid
    assert messages_at(warnings(report), "InstanceGroups[1].InstanceGroupName") == [
        "'login-group' is not in provisioning-parameters.json "
        "(controller_group, login_group or worker_groups): Slurm will not use its nodes"
    ]


def test_slurm_config_agrees_with_the_provisioning_parameters() -> None:
    config = changed(managed_slurm_config(), ("InstanceGroups[1].SlurmConfig.NodeType", "Compute"))
    report = check(config, slurm_provisioning())
    assert messages_at(errors(report), "InstanceGroups[1].SlurmConfig.NodeType") == [
        "is 'Compute' but provisioning-parameters.json names this group at login_group (Login)"
    ]


def test_unknown_provisioning_keys_are_warnings() -> None:
    provisioning = changed(
        slurm_provisioning(), ("fsx_mount_name", "x"), ("worker_groups[0].partition", "dev")
    )
    report = check_slurm(provisioning=provisioning)
    assert report.valid
    assert warnings(report) == [
        (P, "fsx_mount_name", "unknown field (the workshop lifecycle scripts ignore it)"),
        (P, "worker_groups[0].partition", "unknown field (the workshop lifecycle scripts ignore it)"),
    ]


# -- tags, accounts, regions, FSx --------------------------------------------------------------------------
def test_tag_keys_are_unique_and_not_reserved() -> None:
    tags = [
        {"Key": "project", "Value": "a"},
        {"Key": "project", "Value": "b"},
        {"Key": "AWS:owner", "Value": "c"},
    ]
    report = check_slurm(changed(slurm_config(), ("Tags", tags)))
    assert messages_at(errors(report), "Tags[1].Key") == ["duplicate tag key 'project' (also Tags[0])"]
    assert messages_at(errors(report), "Tags[2].Key") == [
        "tag keys starting with 'aws:' are reserved for AWS"
    ]


def test_roles_and_the_eks_cluster_belong_to_one_account() -> None:
    other = "arn:aws:iam::210987654321:role/sagemaker-hyperpod-execution-role"
    report = check(changed(eks_config(), ("InstanceGroups[1].ExecutionRole", other)))
    assert messages_at(errors(report), "InstanceGroups[1].ExecutionRole") == [
        "is in account 210987654321 but Orchestrator.Eks.ClusterArn is in account 123456789012; "
        "a cluster's resources belong to one account"
    ]


def test_resources_must_be_in_the_clusters_region() -> None:
    report = check(eks_config(), region="us-east-1")
    assert messages_at(errors(report), "Orchestrator.Eks.ClusterArn") == [
        "is in us-west-2 but the cluster's region is us-east-1"
    ]


def test_without_a_region_resources_must_agree_with_each_other() -> None:
    fsx = {"FsxLustreConfig": {"DnsName": FSX.replace("us-west-2", "eu-west-1"), "MountName": "abcdefgh"}}
    config = changed(eks_config(), ("InstanceGroups[0].InstanceStorageConfigs", [fsx]))
    report = check(config, region=None)
    assert messages_at(
        errors(report), "InstanceGroups[0].InstanceStorageConfigs[0].FsxLustreConfig.DnsName"
    ) == ["is in eu-west-1 but Orchestrator.Eks.ClusterArn is in us-west-2"]


def test_a_training_plan_in_another_region_is_an_error() -> None:
    plan = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/p5-capacity-plan"
    report = check_slurm(changed(slurm_config(), ("InstanceGroups[2].TrainingPlanArn", plan)))
    assert messages_at(errors(report), "InstanceGroups[2].TrainingPlanArn") == [
        "is in us-east-2 but the cluster's region is us-west-2"
    ]


def test_the_fsx_dns_name_has_the_fsx_shape() -> None:
    report = check_slurm(
        provisioning=changed(slurm_provisioning(), ("fsx_dns_name", "fs-0123456789abcdef0.example.com"))
    )
    assert messages_at(errors(report), "fsx_dns_name") == [
        "must be an FSx DNS name like fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"
    ]


def test_fsx_dns_name_and_mount_name_come_together() -> None:
    no_mount = check_slurm(provisioning=without(slurm_provisioning(), "fsx_mountname"))
    assert messages_at(errors(no_mount), "fsx_mountname") == ["is required when fsx_dns_name is set"]
    no_dns = check_slurm(provisioning=without(slurm_provisioning(), "fsx_dns_name"))
    assert messages_at(errors(no_dns), "fsx_dns_name") == ["is required when fsx_mountname is set"]


def test_every_rule_reports_independently() -> None:
    """The workshop script lets a later check overwrite an earlier failure; here all of them stay."""
    config = changed(
        slurm_config(),
        ("InstanceGroups[1].ThreadsPerCore", 3),
        ("VpcConfig.Subnets", ["subnet-0123456789abcdef0", "subnet-0123456789abcdef0"]),
        ("Tags[0].Key", "aws:x"),
    )
    provisioning = changed(slurm_provisioning(), ("controller_group", "head"), ("login_group", "login"))
    paths = {(file, path) for file, path, _ in errors(check(config, provisioning))}
    assert paths >= {
        (C, "InstanceGroups[1].ThreadsPerCore"),
        (C, "VpcConfig.Subnets[1]"),
        (C, "Tags[0].Key"),
        (P, "controller_group"),
        (P, "login_group"),
    }
