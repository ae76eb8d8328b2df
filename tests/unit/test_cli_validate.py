"""``autopilot validate``: exit codes, one line per problem, JSON output, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli.main import main

from tests.unit.validation.builders import (
    INVALID_SYNTAX,
    SLURM_CONFIG,
    SLURM_PROVISIONING,
    changed,
    slurm_config,
    slurm_provisioning,
)


def write(directory: Path, name: str, document: Any) -> Path:
    path = directory / name
    path.write_text(json.dumps(document, indent=2))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main(["validate", *(str(arg) for arg in argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_valid_config_exits_0_and_prints_no_problem(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--cluster-config", SLURM_CONFIG, "--provisioning-parameters", SLURM_PROVISIONING
    )
    assert (code, out) == (0, "")
    assert "valid: 0 error(s), 0 warning(s)" in err


def test_an_invalid_config_exits_1_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(
        tmp_path,
        "cluster-config.json",
        changed(slurm_config(), ("InstanceGroups[1].ThreadsPerCore", 3), ("NodeRecovery", "Manual")),
    )
    code, out, _ = run(capsys, "--cluster-config", config, "--provisioning-parameters", SLURM_PROVISIONING)
    assert code == 1
    assert out.splitlines() == [
        "cluster-config.json: InstanceGroups[1].ThreadsPerCore: must be 1 or 2",
        "cluster-config.json: NodeRecovery: must be 'Automatic' or 'None'",
    ]


def test_problems_name_the_files_as_the_user_named_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, "p5-cluster.json", slurm_config())
    provisioning = write(
        tmp_path, "provisioning_parameters.json", changed(slurm_provisioning(), ("controller_group", "head"))
    )
    code, out, _ = run(capsys, "--cluster-config", config, "--provisioning-parameters", provisioning)
    assert code == 1
    assert out.splitlines()[0] == (
        "provisioning_parameters.json: controller_group: 'head' is not an instance group in "
        "cluster-config.json (groups: controller-machine, login-group, worker-group-1)"
    )
    assert "warning: p5-cluster.json: InstanceGroups[0].InstanceGroupName: 'controller-machine'" in out


def test_warnings_alone_exit_0_and_are_marked(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--cluster-config", SLURM_CONFIG)
    assert code == 0
    assert out.splitlines() == [
        "warning: provisioning-parameters.json: not given: the Slurm controller, login and worker groups "
        "were not checked against InstanceGroups"
    ]
    assert "valid: 0 error(s), 1 warning(s)" in err


def test_a_json_syntax_error_exits_1_with_line_and_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--cluster-config", INVALID_SYNTAX)
    assert (code, out) == (1, "invalid-syntax.json: line 3, column 3: Expecting ',' delimiter\n")


def test_syntax_errors_in_both_files_are_reported_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    provisioning = tmp_path / "provisioning_parameters.json"
    provisioning.write_text('{"version": "1.0.0",}')
    code, out, _ = run(capsys, "--cluster-config", INVALID_SYNTAX, "--provisioning-parameters", provisioning)
    assert code == 1
    assert out.splitlines() == [
        "invalid-syntax.json: line 3, column 3: Expecting ',' delimiter",
        "provisioning_parameters.json: line 1, column 21: Expecting property name enclosed in double quotes",
    ]


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"[]", "cluster-config.json: must be a JSON object, not an array"),
        (b'{"ClusterName": "caf\xe9"}', "cluster-config.json: is not UTF-8 text"),
    ],
)
def test_a_file_that_is_not_a_json_object_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, line: str
) -> None:
    config = tmp_path / "cluster-config.json"
    config.write_bytes(content)
    assert run(capsys, "--cluster-config", config)[:2] == (1, f"{line}\n")


def test_json_format_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, "cluster.json", changed(slurm_config(), ("InstanceGroups[1].ThreadsPerCore", 3)))
    code, out, _ = run(capsys, "--cluster-config", config, "--format", "json")
    assert code == 1
    assert json.loads(out) == {
        "valid": False,
        "errors": [
            {"file": "cluster.json", "path": "InstanceGroups[1].ThreadsPerCore", "message": "must be 1 or 2"}
        ],
        "warnings": [
            {
                "file": "provisioning-parameters.json",
                "path": "",
                "message": "not given: the Slurm controller, login and worker groups were not checked "
                "against InstanceGroups",
            }
        ],
        "unchecked": [],
    }


def test_json_format_of_a_valid_config(capsys: pytest.CaptureFixture[str]) -> None:
    argv = (
        "--cluster-config",
        SLURM_CONFIG,
        "--provisioning-parameters",
        SLURM_PROVISIONING,
        "--format",
        "json",
    )
    code, out, _ = run(capsys, *argv)
    assert (code, json.loads(out)) == (0, {"valid": True, "errors": [], "warnings": [], "unchecked": []})


def test_the_region_flag_checks_resources_against_it(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--cluster-config", SLURM_CONFIG, "--provisioning-parameters", SLURM_PROVISIONING)
    code, out, _ = run(capsys, *argv, "--region", "eu-central-1")
    assert code == 1
    assert out.splitlines() == [
        "provisioning_parameters.json: fsx_dns_name: is in us-west-2 but the cluster's region is eu-central-1"
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--cluster-config", "does-not-exist.json"],
        ["validate", "--cluster-config", str(SLURM_CONFIG), "--provisioning-parameters", "missing.json"],
        ["validate", "--cluster-config", str(SLURM_CONFIG.parent)],
        ["validate", "--cluster-config", str(SLURM_CONFIG), "--format", "yaml"],
        ["validate"],
        ["validate", "--cluster-config"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error:" in captured.err


def test_an_unreadable_file_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--cluster-config", "nope.json"]) == 2
    assert "error: cannot read nope.json: No such file or directory" in capsys.readouterr().err


def test_aws_checks_need_a_region(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    assert main(["validate", "--cluster-config", str(SLURM_CONFIG), "--aws"]) == 2
    assert "--aws needs a region: pass --region or configure a default region" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--help"]) == 0
    assert "--provisioning-parameters" in capsys.readouterr().out


def test_the_installed_console_script_runs_validate() -> None:
    script = Path(sys.executable).with_name("autopilot")
    result = subprocess.run(
        [str(script), "validate", "--cluster-config", str(INVALID_SYNTAX)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (
        1,
        "invalid-syntax.json: line 3, column 3: Expecting ',' delimiter\n",
    )


def test_aws_checks_without_credentials_say_so_per_check_and_exit_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never reach for instance metadata
    argv = ["--cluster-config", SLURM_CONFIG, "--provisioning-parameters", SLURM_PROVISIONING]
    code, out, err = run(capsys, *argv, "--aws", "--region", "us-west-2")
    unchecked = [line for line in out.splitlines() if line.startswith("unchecked: ")]
    assert code == 3
    # every resource the config names: subnet, security group, FSx, the script in S3, the role, the
    # instance quotas
    assert [line.split(": ")[2] for line in unchecked] == [
        "VpcConfig.Subnets[0]",
        "VpcConfig.SecurityGroupIds[0]",
        "fsx_dns_name",
        "InstanceGroups[0].LifeCycleConfig.OnCreate",
        "InstanceGroups[0].LifeCycleConfig.SourceS3Uri",
        "InstanceGroups[0].ExecutionRole",
        "InstanceGroups[0].InstanceCount",
    ]
    assert all("could not check" in line and "Unable to locate credentials" in line for line in unchecked)
    assert err.strip().endswith("valid: 0 error(s), 0 warning(s), 7 check(s) could not run")


def test_an_execution_role_outside_the_stack_patterns_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    role = "arn:aws:iam::123456789012:role/AdminRole"
    config = write(
        tmp_path, "cluster.json", changed(slurm_config(), ("InstanceGroups[1].ExecutionRole", role))
    )
    code, out, _ = run(capsys, "--cluster-config", config, "--provisioning-parameters", SLURM_PROVISIONING)
    assert (code, out) == (
        1,
        "cluster.json: InstanceGroups[1].ExecutionRole: role name 'AdminRole' does not match the stack's "
        "ExecutionRoleNamePatterns (*HyperPod*, *hyperpod*); "
        "Autopilot may pass only those roles to SageMaker\n",
    )
    argv = ("--cluster-config", config, "--provisioning-parameters", SLURM_PROVISIONING)
    assert run(capsys, *argv, "--execution-role-name-patterns", "Admin*,*hyperpod*")[0] == 0


def test_strict_fails_on_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--strict", "--cluster-config", SLURM_CONFIG)
    assert code == 1
    assert out.startswith("warning: provisioning-parameters.json: not given")
    assert "valid: 0 error(s), 1 warning(s)" in err


def test_a_yaml_file_is_named_as_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cluster-config.yaml"
    config.write_text("# my cluster\nClusterName: ml-cluster\nInstanceGroups:\n  - InstanceGroupName: a\n")

    code, out, _ = run(capsys, "--cluster-config", config)

    assert code == 1
    assert out.startswith("cluster-config.yaml: is YAML, not JSON: the file is read as JSON")
