"""Callers are people, through the SigV4-signed local API: two IAM Identity Center users of one
permission set cannot delete, pause or reboot each other's clusters (issue 20).

Identity Center signs its users in as sessions of one role per permission set,
``AWSReservedSSO_<PermissionSet>_<hex>`` under ``/aws-reserved/sso.amazonaws.com/``, named after the
user. Here that role is made in moto's IAM and each user is an STS session of it with the user's name
(moto has no Identity Center), so the API sees what API Gateway would put in
``requestContext.identity.userArn``: ``arn:aws:sts::<account>:assumed-role/AWSReservedSSO_.../alice``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from autopilot_cli.client import ApiError, AutopilotClient
from botocore.credentials import Credentials

from sandbox.apps.demo.runner import DEMO_PARAMETERS
from sandbox.harness.core import Sandbox
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
PERMISSION_SET_ROLE = "AWSReservedSSO_MLResearcher_0123456789abcdef"
SSO_PATH = "/aws-reserved/sso.amazonaws.com/"
# What the permission set grants: calling the API (API Gateway's IAM authorization).
INVOKE_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:aws:execute-api:*:*:*"}
    ],
}
STEP_S = 1800.0  # simulated seconds the frozen clock moves between two polls of the create


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters=DEMO_PARAMETERS, speed=0, schedules=False) as running:
        yield running


@pytest.fixture(scope="module")
def api_url(sandbox: Sandbox) -> str:
    return sandbox.serve_api(0)


def identity_center_user(sandbox: Sandbox, api_url: str, user: str) -> AutopilotClient:
    """An API client signing as ``user``'s session of the permission set's role."""
    iam = sandbox.client("iam")
    try:
        role_arn = iam.get_role(RoleName=PERMISSION_SET_ROLE)["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {
                        "Federated": f"arn:aws:iam::{sandbox.account_id}:saml-provider/AWSSSO_x_DO_NOT_DELETE"
                    },
                    "Action": ["sts:AssumeRoleWithSAML", "sts:TagSession"],
                }
            ],
        }
        role_arn = iam.create_role(
            RoleName=PERMISSION_SET_ROLE, Path=SSO_PATH, AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]
        iam.put_role_policy(
            RoleName=PERMISSION_SET_ROLE,
            PolicyName="AwsSSOInlinePolicy",
            PolicyDocument=json.dumps(INVOKE_POLICY),
        )
    credentials = sandbox.client("sts").assume_role(RoleArn=role_arn, RoleSessionName=user)["Credentials"]
    return AutopilotClient(
        api_url,
        region=sandbox.region,
        credentials=Credentials(
            credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"]
        ),
    )


def created(sandbox: Sandbox, api: AutopilotClient, body: dict[str, Any]) -> dict[str, Any]:
    """Create the cluster and step the frozen clock until the create ends."""
    operation_id = api.create_cluster(body)["operationId"]
    deadline = time.monotonic() + 60
    while (operation := api.get_operation(operation_id))["status"] == "RUNNING":
        assert time.monotonic() < deadline, operation
        sandbox.advance(STEP_S)
        time.sleep(0.05)
    return operation


def test_identity_center_users_of_one_permission_set_cannot_act_on_each_others_clusters(
    sandbox: Sandbox, api_url: str
) -> None:
    alice = identity_center_user(sandbox, api_url, "alice")
    bob = identity_center_user(sandbox, api_url, "bob")
    operation = created(sandbox, alice, create_body("alice-cluster"))
    assert operation["status"] == "SUCCEEDED", operation
    alice_arn = f"arn:aws:sts::{sandbox.account_id}:assumed-role/{PERMISSION_SET_ROLE}/alice"
    assert operation["requestedBy"] == alice_arn
    node = next(n["InstanceId"] for n in alice.list_nodes("alice-cluster"))

    for verb, act in (
        ("delete", lambda: bob.delete_cluster("alice-cluster")),
        ("pause or resume healing of", lambda: bob.set_healing("alice-cluster", paused=True)),
        ("reboot nodes of", lambda: bob.reboot_node("alice-cluster", node)),
    ):
        with pytest.raises(ApiError) as refused:
            act()
        assert refused.value.status == 403, verb
        assert f"may not {verb} cluster 'alice-cluster'" in refused.value.message

    assert alice.get_cluster("alice-cluster")["status"] == "ACTIVE"
    assert alice.get_healing("alice-cluster")["paused"] is False
    assert [o["kind"] for o in alice.list_operations("alice-cluster")] == ["CreateCluster"]
    # alice herself may
    assert alice.set_healing("alice-cluster", paused=True)["paused"] is True
    assert alice.delete_cluster("alice-cluster")["status"] == "RUNNING"
