"""The names of autopilot.models.cost_allocation: project budget names valid for Budgets and never a
cluster budget's, the cost tag keys a stack configures, the file systems read off the provisioning
parameters."""

from __future__ import annotations

import re

import botocore.session
import pytest
from autopilot.models.cost_allocation import (
    CostTagKeys,
    budget_name_for,
    file_system_ids,
    parse_cost_tag_keys,
    project_budget_name_for,
)

_BUDGET_NAME = botocore.session.get_session().get_service_model("budgets").shape_for("BudgetName").metadata


@pytest.mark.parametrize(
    ("project", "expected"),
    [
        ("llm-pretraining", "hyperpod-project.llm-pretraining"),
        ("team:vision/2026", None),
        ("x" * 256, None),
    ],
)
def test_project_budget_names_are_valid_budget_names(project: str, expected: str | None) -> None:
    name = project_budget_name_for(project)

    assert _BUDGET_NAME["min"] <= len(name) <= _BUDGET_NAME["max"]
    assert re.fullmatch(r"[^:\\]+", name)
    assert name == expected or (expected is None and name != project_budget_name_for(project + "!"))


_CLUSTER_NAME = (
    botocore.session.get_session().get_service_model("sagemaker").shape_for("ClusterName").metadata
)


@pytest.mark.parametrize("project", ["llm", "llm-pretraining", "team:vision/2026", "x" * 256])
def test_no_cluster_budget_is_named_as_a_project_budget(project: str) -> None:
    # A cluster named "project-<project>" once had the project's budget name: its Cleanup deleted the
    # project's budget, and BudgetAlertsFunction took the project's notifications for the cluster's.
    project_budget = project_budget_name_for(project)
    cluster_part = project_budget.removeprefix(budget_name_for(""))

    assert budget_name_for(f"project-{project}") != project_budget
    assert not re.fullmatch(_CLUSTER_NAME["pattern"], cluster_part)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", CostTagKeys()),
        ("owner=owner,project=project,cost-center=cost-center", CostTagKeys()),
        ("cost-center=CostCenter", CostTagKeys(cost_center="CostCenter")),
        (" owner = Owner , project=Project ", CostTagKeys(owner="Owner", project="Project")),
    ],
)
def test_cost_tag_keys_parse(text: str, expected: CostTagKeys) -> None:
    assert parse_cost_tag_keys(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("team=Team", "unknown field 'team'"),
        ("owner=", "'' is not a tag key"),
        ("owner=aws:owner", "is not a tag key"),
        ("owner=ClusterName", "must differ"),
        ("owner=x,project=x", "must differ"),
    ],
)
def test_cost_tag_keys_refuse_what_would_break_the_tag_set(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cost_tag_keys(text)


def test_file_systems_are_read_from_the_provisioning_parameters_dns_names() -> None:
    assert file_system_ids(
        {
            "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "fsx_openzfs_dns_name": "FS-0AAAAAAAAAAAAAAA1.fsx.us-east-1.amazonaws.com",
            "fsx_mountname": "abcdefgh",
            "other_dns_name": "example.com",
        }
    ) == ["fs-0123456789abcdef0", "fs-0aaaaaaaaaaaaaaa1"]
    assert file_system_ids(None) == []
