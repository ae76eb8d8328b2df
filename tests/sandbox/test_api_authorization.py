"""The local API authorizes a verified caller as API Gateway does: by the caller's own IAM policies
(``execute-api:Invoke`` on the request's ARN; ``lambda:InvokeFunction`` where SAM invokes the
function with the caller's credentials)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto import mock_aws

from sandbox.emulator.deploy.template import load_template
from sandbox.emulator.deploy.transform import transform
from sandbox.harness.core import Sandbox

FIXTURE = Path(__file__).parent / "fixtures" / "template.yaml"
TEMPLATE = Path(__file__).parents[2] / "template.yaml"
ACCOUNT = "123456789012"
LAMBDA = {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": "*"}


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[Sandbox, str]]:
    with Sandbox(FIXTURE, simulators=False, background=False, seed=5) as sandbox:
        yield sandbox, sandbox.serve_api(0)


def call(method: str, url: str, credentials: Credentials) -> requests.Response:
    request = AWSRequest(method=method, url=url, data=b"")
    SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return requests.request(method, prepared.url, headers=dict(prepared.headers), timeout=10)


def execute_api(sandbox: Sandbox, resource: str = "") -> str:
    """The FixtureApi's execute-api ARN prefix (``<api-id>/<stage>/``) plus ``resource``."""
    api = sandbox.stack.apis["FixtureApi"]
    return f"arn:aws:execute-api:us-east-1:{ACCOUNT}:{api.api_id}/{api.stage}/{resource}"


def session(sandbox: Sandbox, role: str, statements: list[dict[str, Any]], **assume: Any) -> Credentials:
    """AssumeRole credentials of a new role whose one inline policy is ``statements``."""
    iam = sandbox.client("iam")
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    if statements:
        document = json.dumps({"Version": "2012-10-17", "Statement": statements})
        iam.put_role_policy(RoleName=role, PolicyName="api", PolicyDocument=document)
    creds = sandbox.client("sts").assume_role(RoleArn=arn, RoleSessionName="s1", **assume)["Credentials"]
    return Credentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])


def test_a_role_allowed_one_route_is_denied_another_with_api_gateways_answer(
    api: tuple[Sandbox, str],
) -> None:
    sandbox, url = api
    allowed = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": execute_api(sandbox, "GET/items/*"),
    }
    creds = session(sandbox, "items-reader", [allowed, LAMBDA])

    assert call("GET", f"{url}/items/1", creds).status_code == 200
    assert call("GET", f"{url}/{sandbox.stack.apis['FixtureApi'].stage}/items/1", creds).status_code == 200
    refused = call("GET", f"{url}/files/a/b", creds)

    assert refused.status_code == 403
    assert refused.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    masked = execute_api(sandbox, "GET/files/a/b").replace(ACCOUNT, "********" + ACCOUNT[-4:])
    assert refused.json() == {
        "Message": f"User: arn:aws:sts::{ACCOUNT}:assumed-role/items-reader/s1 is not authorized to perform: "
        f"execute-api:Invoke on resource: {masked}"
    }
    assert call("PUT", f"{url}/files/a", creds).status_code == 403  # the method is part of the ARN


def test_an_explicit_deny_wins(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    creds = session(
        sandbox,
        "denied-two",
        [
            {"Effect": "Allow", "Action": "execute-api:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": execute_api(sandbox, "*/items/2")},
            LAMBDA,
        ],
    )

    assert call("GET", f"{url}/items/1", creds).status_code == 200
    denied = call("GET", f"{url}/items/2", creds)
    assert denied.status_code == 403
    assert denied.json()["Message"].endswith(" with an explicit deny")


def test_a_wildcard_resource_and_a_users_group_policy_allow(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    iam = sandbox.client("iam")
    iam.create_user(UserName="wildcard-user")
    iam.create_group(GroupName="api-users")
    iam.add_user_to_group(GroupName="api-users", UserName="wildcard-user")
    statement = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": "arn:aws:execute-api:*:*:*/*/*/files/*",
    }
    document = json.dumps({"Version": "2012-10-17", "Statement": [statement, LAMBDA]})
    iam.put_group_policy(GroupName="api-users", PolicyName="files", PolicyDocument=document)
    key = iam.create_access_key(UserName="wildcard-user")["AccessKey"]
    creds = Credentials(key["AccessKeyId"], key["SecretAccessKey"])

    assert call("DELETE", f"{url}/files/x/y/z", creds).status_code == 200
    denied = call("GET", f"{url}/items/1", creds)
    assert denied.status_code == 403
    assert denied.json()["Message"].startswith(f"User: arn:aws:iam::{ACCOUNT}:user/wildcard-user is not")


def test_a_session_policy_and_a_permissions_boundary_narrow_the_role(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    everything = {"Effect": "Allow", "Action": "*", "Resource": "*"}
    only_one = {"Effect": "Allow", "Action": ["execute-api:Invoke", "lambda:*"], "Resource": "*"}
    one_item = {**only_one, "NotResource": execute_api(sandbox, "GET/items/2")}
    del one_item["Resource"]
    narrowed = session(
        sandbox,
        "session-narrowed",
        [everything],
        Policy=json.dumps({"Version": "2012-10-17", "Statement": [one_item]}),
    )
    assert call("GET", f"{url}/items/1", narrowed).status_code == 200
    assert call("GET", f"{url}/items/2", narrowed).status_code == 403

    iam = sandbox.client("iam")
    boundary = iam.create_policy(
        PolicyName="no-files",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{**one_item, "NotResource": execute_api(sandbox, "*/files/*")}],
            }
        ),
    )["Policy"]["Arn"]
    bounded = session(sandbox, "bounded", [everything])
    iam.put_role_permissions_boundary(RoleName="bounded", PermissionsBoundary=boundary)
    assert call("GET", f"{url}/items/2", bounded).status_code == 200
    assert call("GET", f"{url}/files/a", bounded).status_code == 403


def test_execute_api_invoke_alone_does_not_invoke_a_function_run_with_the_callers_credentials(
    api: tuple[Sandbox, str],
) -> None:
    sandbox, url = api
    routes = {(r.method, r.path): r for r in sandbox.stack.apis["FixtureApi"].routes}
    assert routes[("GET", "/items/{id}")].caller_credentials  # SAM's AWS_IAM default
    creds = session(
        sandbox, "invoke-only", [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"}]
    )

    answer = call("GET", f"{url}/items/1", creds)

    assert answer.status_code == 500
    assert answer.json() == {"message": "Internal server error"}
    assert requests.get(f"{url}/health", timeout=10).status_code == 200  # NONE routes check nobody


def test_the_account_root_and_a_role_without_policies(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    assert call("GET", f"{url}/items/1", Credentials("testing", "testing", "testing")).status_code == 200
    assert call("GET", f"{url}/items/1", session(sandbox, "no-policy", [])).status_code == 403


def test_the_stack_api_has_no_resource_policy_the_local_server_would_ignore() -> None:
    """The local server evaluates identity policies only: a resource policy on the API (Auth.ResourcePolicy
    or Policy) would need evaluating too before the sandbox may serve it."""
    properties = load_template(TEMPLATE)["Resources"]["AutopilotApi"]["Properties"]
    assert "Policy" not in properties
    assert "ResourcePolicy" not in properties.get("Auth", {})


def test_the_stacks_api_invokes_its_functions_itself_so_callers_need_execute_api_invoke_only() -> None:
    """InvokeRole NONE: no integration runs as the caller (the documented caller policies and the
    agent's one permission hold no lambda:InvokeFunction)."""
    template = load_template(TEMPLATE)
    parameters = {name: spec.get("Default") for name, spec in template["Parameters"].items()}
    with mock_aws():
        translated, _ = transform(
            template, parameters, region="us-east-1", account_id=ACCOUNT, stack_name="s"
        )
    (api,) = [r for r in translated["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi"]
    integrations = [
        m["x-amazon-apigateway-integration"]
        for ms in api["Properties"]["Body"]["paths"].values()
        for m in ms.values()
    ]
    assert integrations
    assert all("credentials" not in integration for integration in integrations)


def test_a_condition_the_sandbox_cannot_evaluate_is_a_500_not_an_allow(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    by_address = {
        "Effect": "Allow",
        "Action": "execute-api:Invoke",
        "Resource": "*",
        "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}},
    }
    answer = call("GET", f"{url}/items/1", session(sandbox, "by-address", [by_address]))
    assert answer.status_code == 500
    assert answer.json() == {"message": "Internal server error"}
