"""One rule set: `autopilot validate --region <stack region>` and the API's validation give one verdict.

Each config of the table goes through the CLI (as a user runs it) and through POST /validate and
POST /clusters of the stack deployed into moto (its region us-east-1, its ExecutionRoleNamePatterns
the template's default); errors and warnings must be the same, problem for problem.
"""

# ruff: noqa: F401, F811  (the `stack` fixture is imported from test_api and named by the tests)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli.main import main

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import call, executions, stack
from tests.unit.validation.builders import changed, eks_config, slurm_config, slurm_provisioning, without

STACK_REGION = "us-east-1"
FSX_HERE = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
EKS_HERE = "arn:aws:eks:us-east-1:123456789012:cluster/hyperpod-eks-cluster"


def _slurm(*changes: tuple[str, Any]) -> dict[str, Any]:
    return changed(slurm_config(), *changes)


def _provisioning(*changes: tuple[str, Any]) -> dict[str, Any]:
    return changed(slurm_provisioning(), ("fsx_dns_name", FSX_HERE), *changes)


RESTRICTED = {
    "InstanceGroupName": "rig",
    "InstanceType": "ml.p5.48xlarge",
    "InstanceCount": 1,
    "ExecutionRole": "arn:aws:iam::123456789012:role/sagemaker-hyperpod-execution-role",
}

# name -> (cluster-config.json, provisioning-parameters.json or None, valid?)
TABLE: dict[str, tuple[dict[str, Any], dict[str, Any] | None, bool]] = {
    "slurm in the stack's region": (_slurm(), _provisioning(), True),
    "eks in the stack's region": (
        changed(eks_config(), ("Orchestrator.Eks.ClusterArn", EKS_HERE)),
        None,
        True,
    ),
    "FSx in another region": (_slurm(), slurm_provisioning(), False),
    "EKS cluster in another region": (eks_config(), None, False),
    "no NodeRecovery (SageMaker's default, a warning)": (
        without(_slurm(), "NodeRecovery"),
        _provisioning(),
        True,
    ),
    "no VpcConfig": (without(_slurm(), "VpcConfig"), _provisioning(), False),
    "only restricted instance groups": (
        changed(without(_slurm(), "InstanceGroups"), ("RestrictedInstanceGroups", [RESTRICTED])),
        None,
        False,
    ),
    "an execution role outside the patterns": (
        _slurm(("InstanceGroups[2].ExecutionRole", "arn:aws:iam::123456789012:role/AdminRole")),
        _provisioning(),
        False,
    ),
    "a schema error": (_slurm(("InstanceGroups[1].ThreadsPerCore", 3)), _provisioning(), False),
    "slurm without provisioning parameters (a warning)": (_slurm(), None, True),
    "a provisioning group that does not exist": (
        _slurm(),
        _provisioning(("login_group", "nope")),
        False,
    ),
}


def _problems(items: list[dict[str, Any]]) -> list[tuple[str | None, str, str]]:
    return sorted((item.get("file"), item["path"], item["message"]) for item in items)


def _cli(tmp_path: Path, config: dict[str, Any], provisioning: dict[str, Any] | None, capsys: Any) -> Any:
    config_file = tmp_path / "cluster-config.json"
    config_file.write_text(json.dumps(config))
    argv = ["validate", "--cluster-config", str(config_file), "--region", STACK_REGION, "--format", "json"]
    if provisioning is not None:
        provisioning_file = tmp_path / "provisioning-parameters.json"
        provisioning_file.write_text(json.dumps(provisioning))
        argv += ["--provisioning-parameters", str(provisioning_file)]
    capsys.readouterr()
    code = main(argv)
    report = json.loads(capsys.readouterr().out)
    assert code == (0 if report["valid"] else 1)
    return report


@pytest.mark.parametrize("case", list(TABLE))
def test_the_cli_and_the_api_give_the_same_verdict(
    stack: Deployed, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    config, provisioning, valid = TABLE[case]
    cli = _cli(tmp_path, config, provisioning, capsys)

    status, api = call(
        api_event("validate", body={"clusterConfig": config, "provisioningParameters": provisioning})
    )

    assert status == 200
    assert (cli["valid"], api["valid"]) == (valid, valid)
    assert _problems(api["errors"]) == _problems(cli["errors"])
    assert _problems(api["warnings"]) == _problems(cli["warnings"])
    # POST /clusters refuses exactly what validate calls invalid, naming the same fields.
    body = create_body(config.get("ClusterName", "ml-cluster"), provisioningParameters=provisioning)
    body["clusterConfig"] = config
    status, created = call(api_event("create_cluster", body=body))
    if valid:
        assert status == 202, created
    else:
        assert status == 400
        assert {(e.get("file"), e["path"]) for e in created["errors"]} == {
            (file, path) for file, path, _ in _problems(cli["errors"])
        }
        assert executions(stack, "CreateClusterStateMachine") == []
