"""The credentials the agent signs with: the controller instance's role (the cluster's ExecutionRole).

AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN when set (the sandbox, tests), else the
instance metadata service, IMDSv2 only (a session token first: IMDSv1 may be disabled on the node, and
the v2 token cannot be fetched through a forwarding proxy or from a container with hop limit 1).
Instance credentials rotate: they are fetched again 10 minutes before they expire, as botocore's
instance-metadata provider does.
"""

from __future__ import annotations

import json
import os
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Callable, Mapping, NamedTuple, Optional

IMDS_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL_SECONDS = 21600
REFRESH_BEFORE = timedelta(minutes=10)


class CredentialsError(Exception):
    """No credentials could be found or fetched."""


class Credentials(NamedTuple):
    access_key: str
    secret_key: str
    token: Optional[str]
    expires: Optional[datetime]  # None: static (environment)


class CredentialSource:
    """``get()`` returns credentials valid for at least REFRESH_BEFORE (fetching again when needed)."""

    def __init__(
        self,
        environ: Optional[Mapping[str, str]] = None,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        timeout: float = 2.0,
    ) -> None:
        env = os.environ if environ is None else environ
        self._env = env
        # the SDKs' override of the IMDS endpoint (a test's local server)
        self._endpoint = (env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT") or IMDS_ENDPOINT).rstrip("/")
        self._now = now
        self._timeout = timeout
        self._cached: Optional[Credentials] = None
        # never through an http_proxy: the metadata service is link-local, a proxy is another host
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self) -> Credentials:
        access_key = self._env.get("AWS_ACCESS_KEY_ID")
        secret_key = self._env.get("AWS_SECRET_ACCESS_KEY")
        if access_key and secret_key:
            return Credentials(access_key, secret_key, self._env.get("AWS_SESSION_TOKEN") or None, None)
        cached = self._cached
        if cached is None or cached.expires is None or cached.expires - self._now() < REFRESH_BEFORE:
            self._cached = cached = self._from_imds()
        return cached

    def invalidate(self) -> None:
        """Forget the cached credentials (after the API refused them)."""
        self._cached = None

    def _from_imds(self) -> Credentials:
        try:
            token = self._request(
                "PUT", "/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_SECONDS)}
            )
            headers = {"X-aws-ec2-metadata-token": token}
            roles = self._request("GET", "/latest/meta-data/iam/security-credentials/", headers).split()
            if not roles:
                raise CredentialsError("the instance has no IAM role (instance profile)")
            document = json.loads(
                self._request("GET", "/latest/meta-data/iam/security-credentials/" + roles[0], headers)
            )
        except (OSError, ValueError) as error:
            raise CredentialsError(f"instance metadata service: {error}") from None
        if document.get("Code", "Success") != "Success":
            raise CredentialsError(f"instance metadata service: {document.get('Code')}")
        try:
            expires = datetime.strptime(document["Expiration"], "%Y-%m-%dT%H:%M:%SZ").replace(
                tzinfo=timezone.utc
            )
            return Credentials(
                document["AccessKeyId"], document["SecretAccessKey"], document["Token"], expires
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CredentialsError(f"instance metadata service: unexpected credentials ({error})") from None

    def _request(self, method: str, path: str, headers: Mapping[str, str]) -> str:
        url = self._endpoint + path  # http://169.254.169.254 or the SDKs' endpoint override
        request = urllib.request.Request(url, method=method, headers=dict(headers))  # noqa: S310
        with self._opener.open(request, timeout=self._timeout) as response:
            body: bytes = response.read()
        return body.decode("utf-8")
