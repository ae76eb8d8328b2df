"""Schemathesis hooks (``SCHEMATHESIS_HOOKS=tests.e2e.schemathesis_sigv4``): sign every request with
SigV4 for API Gateway's AWS_IAM authorization, as any AWS SDK would (service ``execute-api``).

The credentials and region come from the environment the test gives ``st run``.
"""

from __future__ import annotations

import os
from typing import Any

import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


class SigV4(requests.auth.AuthBase):
    """Signs the request as sent (final URL, headers and body bytes)."""

    def __init__(self, credentials: Credentials, region: str) -> None:
        self._signer = SigV4Auth(credentials, "execute-api", region)

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body.encode() if isinstance(request.body, str) else request.body
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        aws_request = AWSRequest(method=request.method, url=request.url, data=body or b"", headers=headers)
        self._signer.add_auth(aws_request)
        request.headers.update(dict(aws_request.headers.items()))
        return request


_AUTH = SigV4(
    Credentials(
        os.environ["AWS_ACCESS_KEY_ID"],
        os.environ["AWS_SECRET_ACCESS_KEY"],
        os.environ.get("AWS_SESSION_TOKEN"),
    ),
    os.environ["AWS_REGION"],
)


@schemathesis.hook
def before_call(
    context: schemathesis.HookContext, case: schemathesis.Case[Any], kwargs: dict[str, Any]
) -> None:
    kwargs["auth"] = _AUTH
