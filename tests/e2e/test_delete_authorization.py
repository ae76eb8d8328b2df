"""DELETE /clusters/{name} through the SigV4-signed API: only the creator and AdminPrincipalArns may.

Three IAM users with access keys in the sandbox's IAM (moto): alice creates, bob is refused, carol
(listed in AdminPrincipalArns) deletes. The API answers with the identity API Gateway puts in
requestContext.identity for each signer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from autopilot_cli.client import ApiError, AutopilotClient
from botocore.credentials import Credentials

from sandbox.apps.demo.runner import DEMO_RUN_PARAMETERS
from sandbox.harness.core import Sandbox
from tests.e2e.conftest import E2E_SPEED

ACCOUNT = "123456789012"  # moto's default account: the sandbox's
ADMIN = f"arn:aws:iam::{ACCOUNT}:user/carol"
OPERATION_TIMEOUT_S = 90.0
API_USER_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": "execute-api:Invoke",
            "Resource": "arn:aws:execute-api:*:*:*/*",
        },
    ],
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(parameters={**DEMO_RUN_PARAMETERS, "AdminPrincipalArns": ADMIN}, speed=E2E_SPEED) as running:
        assert running.account_id == ACCOUNT
        yield running


def signed_as(sandbox: Sandbox, api_url: str, user: str) -> AutopilotClient:
    """An API client signing with a new IAM user's own access key."""
    iam = sandbox.client("iam")
    iam.create_user(UserName=user)
    # what API Gateway wants of a caller (docs/caller-policy-operator.json is wider)
    iam.put_user_policy(UserName=user, PolicyName="autopilot-api", PolicyDocument=json.dumps(API_USER_POLICY))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return AutopilotClient(
        api_url, region=sandbox.region, credentials=Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    )


def test_only_the_creator_or_an_admin_may_delete(
    sandbox: Sandbox, api_url: str, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    alice, bob, carol = (signed_as(sandbox, api_url, user) for user in ("alice", "bob", "carol"))
    accepted = alice.create_cluster(workshop_request("e2e-authz"))
    created = alice.wait_for_operation(
        accepted["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )
    assert created["status"] == "SUCCEEDED", created.get("error")
    assert created["requestedBy"] == f"arn:aws:iam::{ACCOUNT}:user/alice"

    with pytest.raises(ApiError) as refused:
        bob.delete_cluster("e2e-authz")

    assert refused.value.status == 403
    assert "may not delete cluster 'e2e-authz'" in refused.value.message
    assert alice.get_cluster("e2e-authz")["status"] == "ACTIVE"

    deleted = carol.delete_cluster("e2e-authz")
    finished = carol.wait_for_operation(
        deleted["operationId"], timeout_seconds=OPERATION_TIMEOUT_S, poll_seconds=0.2
    )
    assert finished["status"] == "SUCCEEDED", finished.get("error")
    assert finished["requestedBy"] == ADMIN
    assert alice.get_cluster("e2e-authz")["status"] == "DELETED"
