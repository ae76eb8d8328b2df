"""Schema problems: what the CreateCluster request and provisioning parameters may contain."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot_config.models.cluster_config import CreateClusterRequest
from autopilot_config.validation import (
    CLUSTER_CONFIG,
    PROVISIONING_PARAMETERS,
    Problem,
    load_document,
    validate_config,
)

from tests.unit.validation.builders import (
    changed,
    eks_config,
    errors,
    messages_at,
    slurm_config,
    slurm_provisioning,
    without,
)

C, P = CLUSTER_CONFIG, PROVISIONING_PARAMETERS


def cluster_errors(config: dict[str, Any]) -> list[tuple[str, str, str]]:
    return errors(validate_config(config, slurm_provisioning()))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("InstanceGroups[1].ThreadsPerCore", 3, "must be 1 or 2"),
        ("InstanceGroups[1].ThreadsPerCore", 0, "must be 1 or 2"),
        ("InstanceGroups[2].InstanceCount", 6759, "must be between 0 and 6758"),
        ("InstanceGroups[2].InstanceCount", "4", "must be an integer"),
        ("InstanceGroups[2].InstanceCount", True, "must be an integer"),
        ("InstanceGroups[2].InstanceCount", 4.0, "must be an integer"),
        (
            "ClusterName",
            "ml_cluster",
            "must contain only letters, digits and hyphens, and start and end with a letter or digit",
        ),
        ("ClusterName", "", "must not be empty"),
        ("ClusterName", "a" * 64, "must be at most 63 characters long (is 64)"),
        ("ClusterName", None, "must not be null (leave the field out instead)"),
        ("InstanceGroups[0].InstanceType", "p5.48xlarge", "must be an instance type like ml.p5.48xlarge"),
        (
            "InstanceGroups[0].ExecutionRole",
            "arn:aws:iam::123456789012:user/alice",
            "must be an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
        ),
        (
            "InstanceGroups[0].ExecutionRole",
            "arn:aws:iam::1:role/",
            "must be an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
        ),
        ("InstanceGroups[0].LifeCycleConfig.OnCreate", "", "must not be empty"),
        (
            "InstanceGroups[0].TrainingPlanArn",
            "arn:aws:sagemaker::123456789012:training-plan/",
            "must be at least 50 characters long",
        ),
        (
            "InstanceGroups[0].LifeCycleConfig.SourceS3Uri",
            "bucket/src",
            "must be an S3 URI (s3://bucket/prefix/)",
        ),
        ("NodeRecovery", "Manual", "must be 'Automatic' or 'None'"),
        (
            "InstanceGroups[2].OnStartDeepHealthChecks[0]",
            "Stress",
            "must be 'InstanceStress', 'InstanceConnectivity' or 'MultiNodeTrainingValidation'",
        ),
        ("InstanceGroups[2].OnStartDeepHealthChecks", [], "must have at least 1 item"),
        ("InstanceGroups[2].OnStartDeepHealthChecks", "InstanceStress", "must be a list"),
        ("VpcConfig.Subnets", [], "must have at least 1 item"),
        ("VpcConfig.Subnets", [f"subnet-{i:017x}" for i in range(17)], "must have at most 16 items (has 17)"),
        (
            "VpcConfig.SecurityGroupIds",
            [f"sg-{i:017x}" for i in range(6)],
            "must have at most 5 items (has 6)",
        ),
        ("VpcConfig.SecurityGroupIds[0]", "sg_123", "must contain only letters, digits and hyphens"),
        ("VpcConfig", ["subnet-0123456789abcdef0"], "must be an object"),
        (
            "InstanceGroups[2].InstanceStorageConfigs[0].EbsVolumeConfig.VolumeSizeInGB",
            0,
            "must be between 1 and 16384",
        ),
        (
            "InstanceGroups[2].InstanceStorageConfigs[0].EbsVolumeConfig.RootVolume",
            "yes",
            "must be true or false",
        ),
        ("Tags[0].Key", "x" * 129, "must be at most 128 characters long (is 129)"),
        ("Tags[0].Key", "cost\tcenter", "may contain only letters, digits, spaces and _ . : / = + - @"),
        ("Tags[0].Value", "v" * 257, "must be at most 256 characters long (is 257)"),
        ("Tags", [{"Key": f"k{i}", "Value": "v"} for i in range(51)], "must have at most 50 items (has 51)"),
    ],
)
def test_a_field_outside_the_botocore_shape_is_an_error_at_its_aws_path(
    path: str, value: Any, message: str
) -> None:
    assert messages_at(cluster_errors(changed(slurm_config(), (path, value))), path) == [message]


def test_tag_text_accepts_unicode_letters_numbers_and_spaces() -> None:
    config = changed(
        slurm_config(), ("Tags[0]", {"Key": "Kostenstelle Ä1", "Value": "Forschung: 42 / ü=+@-_."})
    )
    assert cluster_errors(config) == []


@pytest.mark.parametrize(
    "path", ["InstanceGroups[1].ExecutionRole", "InstanceGroups[0].InstanceCount", "ClusterName"]
)
def test_a_missing_required_field_is_reported(path: str) -> None:
    assert messages_at(cluster_errors(without(slurm_config(), path)), path) == ["is required"]


@pytest.mark.parametrize("path", ["InstanceGroups[0].Threads", "VpcConfig.SubnetIds", "Region"])
def test_an_unknown_field_is_an_error_because_aws_rejects_it(path: str) -> None:
    assert messages_at(cluster_errors(changed(slurm_config(), (path, 1))), path) == [
        "unknown field (AWS rejects it)"
    ]


def test_every_schema_problem_is_reported_not_just_the_first() -> None:
    config = changed(
        without(slurm_config(), "InstanceGroups[0].ExecutionRole"),
        ("InstanceGroups[1].ThreadsPerCore", 3),
        ("InstanceGroups[2].InstanceCount", -1),
        ("NodeRecovery", "Sometimes"),
    )
    assert {path for _, path, _ in cluster_errors(config)} >= {
        "InstanceGroups[0].ExecutionRole",
        "InstanceGroups[1].ThreadsPerCore",
        "InstanceGroups[2].InstanceCount",
        "NodeRecovery",
    }


def test_a_storage_config_sets_exactly_one_kind_of_storage() -> None:
    both = {
        "EbsVolumeConfig": {"VolumeSizeInGB": 100},
        "FsxOpenZfsConfig": {"DnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"},
    }
    for storage in (both, {}):
        config = changed(slurm_config(), ("InstanceGroups[2].InstanceStorageConfigs[0]", storage))
        assert messages_at(cluster_errors(config), "InstanceGroups[2].InstanceStorageConfigs[0]") == [
            "must set exactly one of EbsVolumeConfig, FsxLustreConfig, FsxOpenZfsConfig"
        ]


def test_kubernetes_label_problems_name_the_label() -> None:
    config = changed(
        eks_config(),
        ("InstanceGroups[0].KubernetesConfig", {"Labels": {"team/a/b": "ml", "team": "-bad-"}}),
    )
    problems = errors(validate_config(config))
    assert messages_at(problems, 'InstanceGroups[0].KubernetesConfig.Labels["team/a/b"]') == [
        "must be a Kubernetes label key ([prefix/]name)"
    ]
    assert messages_at(problems, 'InstanceGroups[0].KubernetesConfig.Labels["team"]') == [
        "must be a Kubernetes label value"
    ]


def test_timestamps_accept_iso_8601_like_the_aws_cli() -> None:
    patch = {"PatchingStrategy": "WhenIdle", "PatchSchedule": {"NextPatchDate": "2026-12-01T03:00:00Z"}}
    assert cluster_errors(changed(slurm_config(), ("InstanceGroups[2].AutoPatchConfig", patch))) == []
    patch["PatchSchedule"] = {"NextPatchDate": "next tuesday"}
    config = changed(slurm_config(), ("InstanceGroups[2].AutoPatchConfig", patch))
    assert messages_at(
        cluster_errors(config), "InstanceGroups[2].AutoPatchConfig.PatchSchedule.NextPatchDate"
    ) == ["must be a date and time (ISO 8601) or epoch seconds"]


def test_look_around_patterns_from_botocore_are_enforced() -> None:
    slurm = {
        "Slurm": {
            "AccountingDatabase": {
                "Endpoint": "-db-",
                "SecretArn": "arn:aws:secretsmanager:us-west-2:123456789012:secret:db",
            }
        }
    }
    config = changed(slurm_config(), ("Orchestrator", slurm))
    path = "Orchestrator.Slurm.AccountingDatabase.Endpoint"
    assert messages_at(errors(validate_config(config)), path) == ["must be a host name"]


def test_a_cluster_config_that_is_not_an_object_is_one_problem() -> None:
    assert errors(validate_config([1, 2])) == [(C, "", "must be an object")]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("workload_manager", "pbs", "must be 'slurm'"),
        ("worker_groups", [], "must have at least 1 item"),
        (
            "worker_groups[0].partition_name",
            "dev queue",
            "must be a Slurm partition name (no spaces, commas or '=')",
        ),
        ("controller_group", 7, "must be a string"),
        ("fsx_mountname", "bad.name", "must be 1 to 8 letters, digits, '_' or '-'"),
        ("fsx_dns_name", "files.example.com", "must be an FSx DNS name (fs-<id>.fsx.<region>.amazonaws.com)"),
    ],
)
def test_provisioning_parameter_problems_are_reported_in_their_file(
    path: str, value: Any, message: str
) -> None:
    report = validate_config(slurm_config(), changed(slurm_provisioning(), (path, value)))
    assert (P, path, message) in errors(report)


@pytest.mark.parametrize("key", ["version", "workload_manager", "controller_group", "worker_groups"])
def test_provisioning_parameters_need_the_keys_the_lifecycle_scripts_read(key: str) -> None:
    report = validate_config(slurm_config(), without(slurm_provisioning(), key))
    assert (P, key, "is required") in errors(report)


def test_a_json_syntax_error_names_line_and_column() -> None:
    assert load_document('{\n  "ClusterName": "a"\n  "X": 1\n}', C) == Problem(
        file=C, path="line 3, column 3", message="Expecting ',' delimiter"
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[]", "an array"), ('"x"', "a string"), ("null", "null"), ("true", "a boolean"), ("1", "a number")],
)
def test_a_json_document_must_be_an_object(text: str, kind: str) -> None:
    assert load_document(text, P) == Problem(file=P, path="", message=f"must be a JSON object, not {kind}")


def test_the_model_round_trips_to_create_cluster_arguments() -> None:
    config = slurm_config()
    assert CreateClusterRequest.model_validate(config).to_request() == config


def test_the_model_publishes_botocore_constraints_in_its_json_schema() -> None:
    schema = CreateClusterRequest.model_json_schema()
    threads = schema["$defs"]["ClusterInstanceGroupSpecification"]["properties"]["ThreadsPerCore"]["anyOf"][0]
    assert (threads["minimum"], threads["maximum"]) == (1, 2)
    name = schema["properties"]["ClusterName"]
    assert (name["minLength"], name["maxLength"], name["pattern"]) == (
        1,
        63,
        "^(?:[a-zA-Z0-9](-*[a-zA-Z0-9])*)$",
    )
