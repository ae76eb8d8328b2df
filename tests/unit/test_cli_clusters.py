"""`autopilot clusters` (create, delete, list, get, lift-growth-block, scale) and `validate --remote` end
to end through main(), against a fake API that answers only what docs/openapi.json allows: what lands on
stdout (and only there), exit codes, the problems the API names."""

# ruff: noqa: F811  (the fixtures of cli_support, imported, are the tests' parameters)

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.unit.cli_fake_api import FakeApi
from tests.unit.cli_support import (  # noqa: F401  (fixtures)
    ACCEPTED,
    api,
    cluster_view,
    config_files,
    create_argv,
    no_saved_config,
    run,
    three_clusters,
)
from tests.unit.validation.builders import SLURM_CONFIG, SLURM_PROVISIONING

# --- clusters create / delete ---------------------------------------------------------------------


def test_create_sends_the_request_body_and_prints_the_operation(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))

    code, out, _ = run(
        *create_argv(config_files, "--provisioning-parameters", config_files["provisioning"]),
        "--budget-usd", "100", "--alert-email", "ann@example.com",
    )  # fmt: skip

    assert code == 0
    sent = json.loads(api.requests[0]["body"])
    assert sent["owner"] == "ann"
    assert sent["budget"] == {"monthlyLimitUsd": 100.0, "alertEmails": ["ann@example.com"]}
    assert sent["clusterConfig"]["ClusterName"] == "ml-cluster"
    assert sent["provisioningParameters"]
    assert out.splitlines() == [
        "operation op-1 accepted for cluster ml-cluster",
        "follow it: autopilot operations get op-1 --wait",
    ]


def test_create_sends_each_login_target_group_and_names_the_flag_of_a_bad_one(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    ssh = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/autopilot-login-ssh/0a1b2c3d"
    web = ssh.replace("-ssh/", "-web/")
    refused = {
        "message": "a login target group cannot hold the login nodes",
        "errors": [{"path": "loginTargetGroupArns[1]", "message": f"{web} no such target group"}],
    }
    api.answer("POST", "/clusters", (400, refused))

    code, _, err = run(*create_argv(config_files, "--login-target-group", ssh, "--login-target-group", web))

    assert code == 1
    assert json.loads(api.requests[0]["body"])["loginTargetGroupArns"] == [ssh, web]
    assert f"  --login-target-group: loginTargetGroupArns[1]: {web} no such target group" in err.splitlines()


def test_a_dry_run_asks_the_api_to_check_and_prints_what_it_would_send(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    request = {"ClusterName": "ml-cluster", "Tags": [{"Key": "owner", "Value": "ann"}]}
    plan = {
        "clusterName": "ml-cluster",
        "createClusterRequest": request,
        "costTags": [{"Key": "owner", "Value": "ann"}],
        "budget": {"budgetName": "hyperpod-ml-cluster", "limitAmount": "100.00", "costFilter": "x",
                   "subscribers": []},
        "projectBudget": None,
        "checks": ["the config passes"],
        "warnings": [],
    }  # fmt: skip
    api.answer("POST", "/clusters", (200, plan))

    code, out, _ = run(*create_argv(config_files, "--dry-run", "--budget-usd", "100"))

    assert code == 0
    assert urlsplit(api.requests[0]["url"]).query == "dryRun=true"
    assert "Idempotency-Key" not in api.requests[0]["headers"]  # nothing to retry safely: nothing made
    lines = out.splitlines()
    assert lines[:4] == [
        "dry run: cluster ml-cluster would be created; nothing was",
        "  ok  the config passes",
        "budget: hyperpod-ml-cluster, 100.00 USD a month",
        "CreateCluster request:",
    ]
    assert json.loads("\n".join(lines[4:])) == request

    code, out, _ = run(*create_argv(config_files, "--dry-run", "--output", "json"))
    assert json.loads(out) == plan


def test_create_from_a_yaml_file_is_a_usage_error_naming_yaml(api: FakeApi, run: Any, tmp_path: Path) -> None:
    config = tmp_path / "cluster.yaml"
    config.write_text("---\nClusterName: ml-cluster\n")

    code, _, err = run(
        "clusters", "create", "--cluster-config", str(config), "--owner", "a", "--project", "b"
    )

    assert code == 2
    assert f"{config} is YAML, not JSON" in err
    assert api.requests == []


def test_each_invocation_sends_its_own_signed_idempotency_key(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (202, ACCEPTED))
    api.answer("DELETE", "/clusters/ml-cluster", (202, ACCEPTED))

    run(*create_argv(config_files))
    run(*create_argv(config_files))
    run(*create_argv(config_files), "--idempotency-key", "retry-of-yesterday")
    run("clusters", "delete", "ml-cluster")
    run("clusters", "delete", "ml-cluster", "--idempotency-key", "del-1")

    keys = [r["headers"]["Idempotency-Key"] for r in api.requests]
    assert keys[0] != keys[1]
    assert keys[3] not in keys[:2]
    assert str(uuid.UUID(keys[0])) == keys[0]
    assert keys[2] == "retry-of-yesterday"
    assert keys[4] == "del-1"
    assert all("idempotency-key" in r["headers"]["Authorization"] for r in api.requests)  # signed


REJECTION = {
    "message": "the cluster configuration is invalid",
    "errors": [
        {
            "file": "cluster-config.json",
            "path": "InstanceGroups[1].ThreadsPerCore",
            "message": "must be 1 or 2",
        },
        {"location": "body", "path": "owner", "message": "Field required"},
        {"location": "body", "path": "budget.monthlyLimitUsd", "message": "Input should be greater than 0"},
    ],
}


def test_a_rejection_names_each_problem_on_stderr(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (400, REJECTION))

    code, out, err = run(*create_argv(config_files))

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "error: the cluster configuration is invalid (HTTP 400)",
        "  cluster-config.json: InstanceGroups[1].ThreadsPerCore: must be 1 or 2",
        "  --owner: owner: Field required",
        "  --budget-usd: budget.monthlyLimitUsd: Input should be greater than 0",
    ]


def test_in_json_mode_a_rejection_is_a_json_error_on_stdout(
    api: FakeApi, run: Any, config_files: dict[str, str]
) -> None:
    api.answer("POST", "/clusters", (400, REJECTION))

    code, out, err = run(*create_argv(config_files, "--output", "json"))

    assert (code, err) == (1, "")
    assert json.loads(out) == {
        "error": {
            "code": "ApiError",
            "message": "the cluster configuration is invalid (HTTP 400)",
            "status": 400,
            "errors": REJECTION["errors"],
        }
    }


def test_delete_passes_the_stack_and_warnings_go_to_stderr(api: FakeApi, run: Any) -> None:
    warned = {**ACCEPTED, "warnings": [{"path": "x", "message": "careful"}]}
    api.answer("DELETE", "/clusters/ml-cluster", (202, warned))

    code, out, err = run("clusters", "delete", "ml-cluster", "--stack-name", "vpc", "--format", "json")

    assert code == 0
    assert json.loads(out)["operationId"] == "op-1"
    assert "warning: x: careful" in err
    assert api.requests[0]["url"].endswith("?stackName=vpc")


# --- clusters list / get --------------------------------------------------------------------------


def test_list_prints_a_table(api: FakeApi, run: Any) -> None:
    three_clusters(api)
    code, out, _ = run("clusters", "list")

    assert code == 0
    assert [line.split() for line in out.splitlines()[:2]] == [
        ["NAME", "STATUS", "SAGEMAKER", "OWNER", "PROJECT", "CREATED", "BY", "LAST", "OPERATION"],
        ["a", "ACTIVE", "InService", "ann", "llm", "assumed-role/Researchers/ann", "op-1"],
    ]


@pytest.mark.parametrize(
    ("filters", "names"),
    [
        (["--owner", "ann"], ["a", "c"]),
        (["--project", "llm"], ["a", "b"]),
        (["--status", "creating"], ["b"]),
        (["--owner", "ann", "--project", "llm"], ["a"]),
        (["--owner", "nobody"], []),
    ],
)
def test_list_filters_over_every_page(api: FakeApi, run: Any, filters: list[str], names: list[str]) -> None:
    three_clusters(api)
    code, out, _ = run("clusters", "list", *filters, "--output", "json")

    assert code == 0
    assert [c["clusterName"] for c in json.loads(out)] == names


def test_query_selects_and_text_output_is_tab_separated(api: FakeApi, run: Any) -> None:
    def listed(*argv: str) -> str:
        three_clusters(api)
        code, out, _ = run("clusters", "list", *argv)
        assert code == 0
        return str(out)

    assert listed("--query", "[].clusterName", "--output", "text") == "a\tb\tc\n"
    assert listed("--query", "[?owner=='ann'].[clusterName, project]", "--output", "text") == (
        "a\tllm\nc\tvision\n"
    )
    assert listed("--query", "[].{name: clusterName, owner: owner}").splitlines() == [
        "NAME  OWNER",
        "a     ann",
        "b     bob",
        "c     ann",
    ]


def test_a_bad_query_is_a_usage_error(api: FakeApi, run: Any) -> None:
    code, out, _ = run("clusters", "list", "--query", "[?", "--output", "json")

    assert code == 2
    assert json.loads(out)["error"]["code"] == "UsageError"
    assert api.requests == []


def test_list_empty(api: FakeApi, run: Any) -> None:
    api.answer("GET", "/clusters", (200, {"clusters": []}))

    assert run("clusters", "list")[1] == "no clusters\n"
    assert json.loads(run("clusters", "list", "--format", "json")[1]) == []


def test_get_shows_registry_live_status_and_nodes(api: FakeApi, run: Any) -> None:
    view = cluster_view("InService", (3, 4))
    view["sagemaker"]["FailureMessage"] = "one node replaced"
    view["sagemaker"]["InstanceGroups"][1] |= {"InstanceType": "ml.p5.48xlarge", "Status": "Updating"}
    api.answer("GET", "/clusters/ml-cluster", (200, view))
    node = {
        "InstanceId": "i-1",
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Healthy"},
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("clusters", "get", "ml-cluster", "--nodes")
    _, json_out, _ = run("clusters", "get", "ml-cluster", "--nodes", "--format", "json")

    assert code == 0
    assert "sagemaker  InService" in out
    assert "failure    one node replaced" in out
    assert "workers     ml.p5.48xlarge  3/4    Updating" in out
    assert "i-1   workers  ml.p5.48xlarge  Running  -      Healthy  -" in out
    assert json.loads(json_out)["nodes"][0]["InstanceId"] == "i-1"


def test_get_shows_the_slurm_agent_and_each_nodes_slurm_state(api: FakeApi, run: Any) -> None:
    view = cluster_view("InService", (3, 4))
    view["agent"] = {"status": "connected", "lastSeen": "2026-11-27T21:00:00.000Z", "version": "1.0.0"}
    api.answer("GET", "/clusters/ml-cluster", (200, view))
    node = {
        "InstanceId": "i-1",
        "InstanceGroupName": "workers",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": "Running"},
        "health": {"status": "Healthy"},
        "slurm": {
            "state": "MIXED+DRAIN",
            "reason": "autopilot op-7: replace",
            "jobs": ["12", "13"],
            "gpus": 8,
        },
    }
    api.answer("GET", "/clusters/ml-cluster/nodes", (200, {"nodes": [node]}))

    code, out, _ = run("clusters", "get", "ml-cluster", "--nodes")

    assert code == 0
    assert "agent      connected 1.0.0 (last report 2026-11-27T21:00:00.000Z)" in out
    assert "SLURM" in out.splitlines()[-2]
    assert out.splitlines()[-1].split()[4:10] == [
        "MIXED+DRAIN",
        "(autopilot",
        "op-7:",
        "replace)",
        "2",
        "jobs",
    ]


# --- clusters lift-growth-block / scale -----------------------------------------------------------


def test_lift_growth_block(api: FakeApi, run: Any) -> None:
    lifted = {"clusterName": "ml-cluster", "growthBlocked": False, "wasBlocked": True}
    api.answer("DELETE", "/clusters/ml-cluster/growth-block", (200, lifted))

    code, out, _ = run(
        "clusters", "lift-growth-block", "ml-cluster", "--query", "wasBlocked", "--output", "text"
    )

    assert (code, out) == (0, "true\n")


def test_scale_puts_the_group_count(api: FakeApi, run: Any) -> None:
    scaled = {
        "clusterName": "ml-cluster",
        "instanceGroup": "worker-group-1",
        "previousCount": 4,
        "instanceCount": 6,
        "operationId": "op-1",
        "targetCounts": {"controller-machine": 1, "worker-group-1": 6},
    }
    api.answer("PUT", "/clusters/ml-cluster/instance-groups/worker-group-1", (200, scaled))

    code, out, _ = run(
        "clusters",
        "scale",
        "ml-cluster",
        "--group",
        "worker-group-1",
        "--count",
        "6",
        "--query",
        "instanceCount",
        "--output",
        "text",
    )

    assert (code, out) == (0, "6\n")
    assert json.loads(api.requests[0]["body"]) == {"instanceCount": 6}


# --- validate --remote ----------------------------------------------------------------------------


def test_validate_remote_asks_the_api_and_prints_as_locally(api: FakeApi, run: Any) -> None:
    result = {
        "valid": False,
        "errors": [
            {"file": "provisioning-parameters.json", "path": "controller_group", "message": "not a group"}
        ],
        "warnings": [],
    }
    api.answer("POST", "/validate", (200, result))

    code, out, _ = run(
        "validate", "--remote", "--cluster-config", str(SLURM_CONFIG),
        "--provisioning-parameters", str(SLURM_PROVISIONING),
    )  # fmt: skip

    assert code == 1
    assert out == f"{SLURM_PROVISIONING.name}: controller_group: not a group\n"
    sent = json.loads(api.requests[0]["body"])
    assert sent["clusterConfig"] == json.loads(SLURM_CONFIG.read_text())
    assert sent["provisioningParameters"] == json.loads(SLURM_PROVISIONING.read_text())
