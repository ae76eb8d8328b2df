"""The agent's stdlib SigV4 signs exactly as botocore does (and so as API Gateway verifies)."""

from __future__ import annotations

from datetime import UTC, datetime

import botocore.auth
import pytest
from autopilot_agent import sigv4
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

NOW = datetime(2026, 11, 27, 21, 0, 7, tzinfo=UTC)
BODY = b'{"agentVersion":"1.0.0","nodes":[],"results":[]}'


@pytest.mark.parametrize(
    ("url", "token"),
    [
        ("https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/Prod/agent/ml-cluster/reports", "TOKEN/+="),
        ("http://127.0.0.1:41234/Prod/agent/ml-cluster/reports", None),  # the sandbox's API: host with port
        (
            "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com/Prod/agent/a-b%20c/reports?x=1&a=b%20c&a=a",
            None,
        ),
    ],
)
def test_the_signature_is_botocores(monkeypatch: pytest.MonkeyPatch, url: str, token: str | None) -> None:
    ours = sigv4.sign(
        "POST",
        url,
        {"Content-Type": "application/json"},
        BODY,
        access_key="ASIAEXAMPLE",
        secret_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        session_token=token,
        region="us-west-2",
        service="execute-api",
        now=NOW,
    )

    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: NOW.replace(tzinfo=None))
    theirs = AWSRequest(method="POST", url=url, data=BODY, headers={"Content-Type": "application/json"})
    SigV4Auth(
        Credentials("ASIAEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", token),
        "execute-api",
        "us-west-2",
    ).add_auth(theirs)

    assert ours["Authorization"] == theirs.headers["Authorization"]
    assert ours["X-Amz-Date"] == theirs.headers["X-Amz-Date"] == "20261127T210007Z"
    assert ours.get("X-Amz-Security-Token") == theirs.headers.get("X-Amz-Security-Token")


def test_a_changed_byte_changes_the_signature() -> None:
    def signature(body: bytes) -> str:
        return sigv4.sign(
            "POST",
            "https://x.execute-api.us-west-2.amazonaws.com/Prod/agent/c/reports",
            {},
            body,
            access_key="AKID",
            secret_key="secret",
            session_token=None,
            region="us-west-2",
            service="execute-api",
            now=NOW,
        )["Authorization"]

    assert signature(b"{}") != signature(b"{ }")
