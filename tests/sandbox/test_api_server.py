"""The local API: routes, the REST proxy event, and SigV4 (AWS_IAM) like API Gateway."""

from __future__ import annotations

import email.utils
import http.client
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from sandbox.harness.core import Sandbox

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[Sandbox, str]]:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=3) as sandbox:
        yield sandbox, sandbox.serve_api(0)


def signed(
    method: str,
    url: str,
    body: bytes = b"",
    *,
    key: str = "testing",
    secret: str = "testing",
    region: str = "us-east-1",
    service: str = "execute-api",
    when: datetime | None = None,
    token: str | None = "testing",
) -> requests.Response:
    request = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
    signer = SigV4Auth(Credentials(key, secret, token), service, region)
    if when is None:
        signer.add_auth(request)
    else:  # a client whose clock is off
        with mock.patch("botocore.auth.get_current_datetime", return_value=when.replace(tzinfo=None)):
            signer.add_auth(request)
    prepared = request.prepare()
    return requests.request(method, prepared.url, headers=dict(prepared.headers), data=body, timeout=10)


# What API Gateway wants of a caller that is not the account root (sandbox.emulator.api_authorization)
INVOKE_POLICY = json.dumps(
    {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["execute-api:Invoke", "lambda:InvokeFunction"], "Resource": "*"}
        ],
    }
)


def test_unsigned_request_is_missing_authentication_token(api: tuple[Sandbox, str]) -> None:
    _, url = api
    response = requests.get(f"{url}/items/42", timeout=10)
    assert response.status_code == 403
    assert response.json() == {"message": "Missing Authentication Token"}
    assert response.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"


def test_signed_request_reaches_the_function_with_identity_and_path_parameters(
    api: tuple[Sandbox, str],
) -> None:
    sandbox, url = api
    response = signed("GET", f"{url}/items/42?verbose=1&tag=a&tag=b")
    assert response.status_code == 200, response.text
    assert response.headers["X-Fixture"] == "yes"
    body = response.json()
    assert body["resource"] == "/items/{id}"
    assert body["path"] == "/items/42"
    assert body["httpMethod"] == "GET"
    assert body["pathParameters"] == {"id": "42"}
    assert body["queryStringParameters"] == {"verbose": "1", "tag": "b"}
    assert body["stage"] == "test"
    identity = body["identity"]
    assert identity["accessKey"] == "testing"
    assert identity["accountId"] == "123456789012"
    assert identity["userArn"] == "arn:aws:iam::123456789012:root"
    assert identity["sourceIp"] == "127.0.0.1"
    assert sandbox.metrics()["invocations"]["ApiFunction"]["invocations"] >= 1


def test_signed_post_with_body_and_greedy_proxy_path(api: tuple[Sandbox, str]) -> None:
    _, url = api
    payload = json.dumps({"ClusterName": "c1"}).encode()
    response = signed("POST", f"{url}/files/a/b/c.txt", payload)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["resource"] == "/files/{proxy+}"
    assert body["pathParameters"] == {"proxy": "a/b/c.txt"}
    assert json.loads(body["body"]) == {"ClusterName": "c1"}


def test_stage_prefix_is_accepted(api: tuple[Sandbox, str]) -> None:
    _, url = api
    response = signed("GET", f"{url}/test/items")
    assert response.status_code == 200, response.text
    assert response.json()["path"] == "/items"


def test_bad_signature_is_rejected_with_aws_message(api: tuple[Sandbox, str]) -> None:
    _, url = api
    response = signed("GET", f"{url}/items/42", secret="wrong")
    assert response.status_code == 403
    message = response.json()["message"]
    assert message.startswith(
        "The request signature we calculated does not match the signature you provided."
    )
    assert "The Canonical String for this request should have been" in message
    assert response.headers["x-amzn-ErrorType"] == "InvalidSignatureException"


def test_tampered_body_fails_the_signature(api: tuple[Sandbox, str]) -> None:
    _, url = api
    request = AWSRequest(method="POST", url=f"{url}/files/x", data=b'{"a": 1}')
    SigV4Auth(Credentials("testing", "testing"), "execute-api", "us-east-1").add_auth(request)
    prepared = request.prepare()
    response = requests.post(prepared.url, headers=dict(prepared.headers), data=b'{"a": 2}', timeout=10)
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("options", "error_type", "fragment"),
    [
        (
            {"key": "AKIAUNKNOWN"},
            "UnrecognizedClientException",
            "security token included in the request is invalid",
        ),
        ({"service": "s3"}, "InvalidSignatureException", "scoped to correct service: 'execute-api'"),
        ({"region": "eu-west-1"}, "InvalidSignatureException", "scoped to a valid region"),
        (
            {"skew": timedelta(minutes=-6)},
            "InvalidSignatureException",
            "Signature expired",
        ),
        ({"skew": timedelta(minutes=6)}, "InvalidSignatureException", "not yet current"),
    ],
)
def test_signature_errors(
    api: tuple[Sandbox, str], options: dict[str, Any], error_type: str, fragment: str
) -> None:
    _, url = api
    # The skewed signing time is taken now, not when the parameters were collected: a long
    # suite would otherwise move "6 minutes ahead" back inside the allowed window.
    if "skew" in options:
        options = {"when": datetime.now(UTC) + options["skew"]}
    response = signed("GET", f"{url}/items/1", **options)
    assert response.status_code == 403
    assert response.headers["x-amzn-ErrorType"] == error_type
    assert fragment in response.json()["message"]


def test_clock_skew_within_five_minutes_is_allowed(api: tuple[Sandbox, str]) -> None:
    _, url = api
    assert signed("GET", f"{url}/items/1", when=datetime.now(UTC) - timedelta(minutes=4)).status_code == 200


def test_iam_user_keys_from_moto_are_accepted(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    iam = sandbox.client("iam")
    iam.create_user(UserName="alice")
    iam.put_user_policy(UserName="alice", PolicyName="invoke", PolicyDocument=INVOKE_POLICY)
    key = iam.create_access_key(UserName="alice")["AccessKey"]
    response = signed(
        "GET", f"{url}/items/7", key=key["AccessKeyId"], secret=key["SecretAccessKey"], token=None
    )
    assert response.status_code == 200, response.text
    identity = response.json()["identity"]
    assert identity["userArn"] == "arn:aws:iam::123456789012:user/alice"
    assert identity["user"] == iam.get_user(UserName="alice")["User"]["UserId"]


def test_none_auth_route_needs_no_signature(api: tuple[Sandbox, str]) -> None:
    _, url = api
    response = requests.get(f"{url}/health", timeout=10)
    assert response.status_code == 200
    assert response.json()["identity"]["userArn"] is None


def test_unknown_route_and_method_answer_like_api_gateway(api: tuple[Sandbox, str]) -> None:
    _, url = api
    assert signed("GET", f"{url}/nowhere").json() == {"message": "Missing Authentication Token"}
    assert signed("DELETE", f"{url}/items/1").status_code == 403


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "PROPFIND", "CONNECT", "BREW"])
@pytest.mark.parametrize("path", ["/items/1", "/files/any/thing"])  # a GET route and an ANY route
def test_a_method_no_route_declares_is_missing_authentication_token(
    api: tuple[Sandbox, str], method: str, path: str
) -> None:
    _, url = api
    for response in (requests.request(method, f"{url}{path}", timeout=10), signed(method, f"{url}{path}")):
        assert response.status_code == 403  # never http.server's 501 Unsupported method
        assert response.json() == {"message": "Missing Authentication Token"}
        assert response.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"


def test_a_session_token_that_is_not_the_keys_is_rejected(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    assert signed("GET", f"{url}/items/1", token=None).status_code == 200  # the sandbox keys, no token
    invalid = {"message": "The security token included in the request is invalid."}
    response = signed("GET", f"{url}/items/1", token="bogus")
    assert response.status_code == 403
    assert response.json() == invalid
    assert response.headers["x-amzn-ErrorType"] == "UnrecognizedClientException"
    iam = sandbox.client("iam")
    iam.create_user(UserName="token-user")
    key = iam.create_access_key(UserName="token-user")["AccessKey"]
    user = {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    assert signed("GET", f"{url}/items/1", **user, token="testing").json() == invalid  # long-term key
    role = iam.create_role(RoleName="token-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    iam.put_role_policy(RoleName="token-role", PolicyName="invoke", PolicyDocument=INVOKE_POLICY)
    creds = sandbox.client("sts").assume_role(RoleArn=role, RoleSessionName="caller")["Credentials"]
    session = {"key": creds["AccessKeyId"], "secret": creds["SecretAccessKey"]}
    assert signed("GET", f"{url}/items/1", **session, token=creds["SessionToken"]).status_code == 200
    assert signed("GET", f"{url}/items/1", **session, token="testing").json() == invalid
    assert signed("GET", f"{url}/items/1", **session, token=None).json() == invalid


def test_a_body_over_10_mb_is_413_before_it_is_read(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    limit = 10 * 1024 * 1024
    before = sandbox.metrics()["invocations"].get("ApiFunction", {}).get("invocations", 0)
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.putrequest("POST", "/files/big")
        connection.putheader("Content-Length", str(limit + 1))
        connection.endheaders()  # the body is never sent: the answer must not wait for it
        response = connection.getresponse()
        assert response.status == 413
        assert json.loads(response.read()) == {"message": "Request Too Large"}
        assert response.getheader("Connection") == "close"
    finally:
        connection.close()
    assert sandbox.metrics()["invocations"].get("ApiFunction", {}).get("invocations", 0) == before
    exactly = signed("POST", f"{url}/files/big", b"x" * limit)  # the limit itself is allowed
    # it reached the function (whose echo of it is over Lambda's 6 MB response limit: 502)
    assert exactly.status_code != 413, exactly.text[:200]
    assert sandbox.metrics()["invocations"]["ApiFunction"]["invocations"] == before + 1


def test_function_error_is_502(api: tuple[Sandbox, str]) -> None:
    _, url = api
    response = signed("GET", f"{url}/files/boom")
    assert response.status_code == 502
    assert response.json() == {"message": "Internal server error"}


def test_the_date_header_is_the_sandbox_clock_and_signing_stays_on_the_wall(api: tuple[Sandbox, str]) -> None:
    sandbox, url = api
    sandbox.advance(10 * 86400)  # the sandbox's world ten days ahead of the caller's

    response = signed("GET", f"{url}/items/42")  # signed with the caller's (wall) clock: accepted

    assert response.status_code == 200
    served = email.utils.parsedate_to_datetime(response.headers["Date"])
    assert abs(served - sandbox.clock.now()) < timedelta(seconds=5)
    assert served - datetime.now(UTC) > timedelta(days=9)
