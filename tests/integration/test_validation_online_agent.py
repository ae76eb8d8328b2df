"""The --aws checks of the Slurm agent on the controller against moto (docs/agent.md): its role and route."""

# ruff: noqa: F811  (the tests name fixtures imported from validation_online_support.py)

from __future__ import annotations

import contextlib
import json
from typing import Any

import boto3
import pytest

from tests.integration.validation_online_support import (
    API,
    GAPS,
    SAGEMAKER_TRUST,
    Account,
    C,
    _upload,
    account,  # noqa: F401 (a fixture the tests name)
    check,
    moto,  # noqa: F401 (the fixture account needs)
)
from tests.unit.validation.builders import (
    ACCOUNT,
    changed,
    errors,
    messages_at,
    unchecked,
    warnings,
)

# --- the Slurm agent on the controller (docs/agent.md) ---------------------------------------------------
CONTROLLER_ROLE = "autopilot-agent-controller-role"
ROUTE = f"arn:aws:execute-api:us-west-2:{ACCOUNT}:a1b2c3d4e5/dev/POST/agent/ml-cluster/reports"


def _with_agent(account: Account) -> None:
    _upload(account, "src/autopilot-agent/install.sh", b"#!/bin/bash\n")


def _own_controller_role(config: dict[str, Any]) -> dict[str, Any]:
    iam = boto3.client("iam")
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=CONTROLLER_ROLE, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))
    arn = f"arn:aws:iam::{ACCOUNT}:role/{CONTROLLER_ROLE}"
    return changed(config, ("InstanceGroups[0].ExecutionRole", arn))


def test_the_agents_role_is_not_checked_where_the_agent_is_not_installed(account: Account) -> None:
    report = check(account.config(), account.provisioning(), api_endpoint=API)
    assert (errors(report), warnings(report), unchecked(report)) == ([], [], [])


def test_a_controller_role_shared_with_other_groups_is_a_warning_once_the_agent_is_installed(
    account: Account,
) -> None:
    _with_agent(account)
    report = check(account.config(), account.provisioning(), api_endpoint=API)
    assert report.valid
    assert messages_at(warnings(report), "InstanceGroups[0].ExecutionRole") == [
        "the Slurm controller's role is also the role of login-group, worker-group-1: any job there can "
        "read its credentials and report to Autopilot as the controller's agent; give the controller group "
        "a role of its own (docs/agent.md)"
    ]
    assert (
        check(_own_controller_role(account.config()), account.provisioning(), api_endpoint=API).warnings == []
    )


@pytest.mark.parametrize(
    ("decision", "verb"), [("implicitDeny", "is not allowed"), ("explicitDeny", "is denied")]
)
def test_a_controller_role_that_may_not_call_the_agents_route_is_a_warning(
    account: Account, decision: str, verb: str
) -> None:
    _with_agent(account)
    GAPS.decisions = {("execute-api:Invoke", ROUTE): decision}
    report = check(_own_controller_role(account.config()), account.provisioning(), api_endpoint=API)
    assert report.valid
    assert warnings(report) == [
        (
            C,
            "InstanceGroups[0].ExecutionRole",
            f"role {CONTROLLER_ROLE} {verb} execute-api:Invoke on {ROUTE}: the Slurm agent installed on "
            "the controller cannot report, so repairs go on without Slurm (docs/agent.md has the policy "
            "statement)",
        )
    ]


def test_without_autopilots_endpoint_the_agents_route_is_unchecked(account: Account) -> None:
    _with_agent(account)
    report = check(_own_controller_role(account.config()), account.provisioning())
    assert [message for _, _, message in unchecked(report)] == [
        "whether the role may call the Slurm agent's route (execute-api:Invoke): Autopilot's API endpoint is "
        "not known (pass --endpoint or run `autopilot configure`)"
    ]
