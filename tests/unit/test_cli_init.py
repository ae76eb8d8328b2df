"""``autopilot init`` and examples/: the starting files validate, placeholders are listed, nothing is
overwritten by accident."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autopilot_cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def files(directory: Path) -> list[str]:
    arguments = ["--cluster-config", str(directory / "cluster-config.json")]
    if (directory / "provisioning_parameters.json").exists():
        arguments += ["--provisioning-parameters", str(directory / "provisioning_parameters.json")]
    return arguments


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_the_examples_validate_without_a_warning(
    orchestrator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "validate", "--strict", "--region", "us-east-1", *files(ROOT / "examples" / orchestrator)
    )

    assert (code, out) == (0, ""), err
    assert "valid: 0 error(s), 0 warning(s)" in err


def test_the_slurm_example_has_a_controller_login_gpu_workers_and_fsx() -> None:
    config = json.loads((ROOT / "examples/slurm/cluster-config.json").read_text())
    provisioning = json.loads((ROOT / "examples/slurm/provisioning_parameters.json").read_text())

    groups = {group["InstanceGroupName"]: group for group in config["InstanceGroups"]}
    assert {provisioning["controller_group"], provisioning["login_group"]} <= groups.keys()
    assert all(
        groups[w["instance_group_name"]]["InstanceType"].startswith("ml.p")
        for w in provisioning["worker_groups"]
    )
    assert provisioning["fsx_dns_name"]
    assert provisioning["fsx_mountname"]


@pytest.mark.parametrize("orchestrator", ["slurm", "eks"])
def test_init_writes_the_example_and_lists_what_to_replace(
    orchestrator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "init", "--orchestrator", orchestrator, "--directory", tmp_path, "--output", "json"
    )

    assert code == 0, err
    result = json.loads(out)
    example = ROOT / "examples" / orchestrator
    for name in result["files"]:
        written = Path(name)
        assert json.loads(written.read_text()) == json.loads((example / written.name).read_text())
    paths = {place["path"] for place in result["placeholders"]}
    assert {
        "VpcConfig.Subnets[0]",
        "VpcConfig.SecurityGroupIds[0]",
        "InstanceGroups[0].ExecutionRole",
    } <= paths
    assert run(capsys, "validate", "--strict", "--region", "us-east-1", *files(tmp_path))[0] == 0


def test_init_refuses_to_overwrite_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster-config.json").write_text("{}")

    code, _, err = run(capsys, "init", "--directory", tmp_path)

    assert code == 2
    assert "cluster-config.json" in err
    assert "--force" in err
    assert (tmp_path / "cluster-config.json").read_text() == "{}"
    assert not (tmp_path / "provisioning_parameters.json").exists()

    code, out, _ = run(capsys, "init", "--directory", tmp_path, "--force", "--cluster-name", "lab-a")

    assert code == 0
    assert json.loads((tmp_path / "cluster-config.json").read_text())["ClusterName"] == "lab-a"
    assert "replace these example values" in out
    assert "VpcConfig.Subnets[0]: subnet-0123456789abcdef0" in out
