"""SigV4 verification for the local API (API Gateway's AWS_IAM authorization).

The signature is recomputed with botocore's own ``SigV4Auth`` over the request as received (method,
raw path and query, the signed headers, the body), so anything botocore signs verifies, and a
changed byte does not. Errors carry API Gateway's status, ``x-amzn-ErrorType`` and message.

Known callers: the sandbox credentials (``testing``/``testing``, the account root; the session token
``testing`` optional), and every access key moto's IAM and STS hold (CreateAccessKey users, no
session token; AssumeRole sessions, their own token required). A request whose
``X-Amz-Security-Token`` is not its key's, or a temporary key without its token, gets API Gateway's
403 ``UnrecognizedClientException`` "The security token included in the request is invalid.".
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto.iam.models import iam_backends
from moto.sts.models import sts_backends

ALGORITHM: Final = "AWS4-HMAC-SHA256"
MAX_SKEW: Final = timedelta(minutes=5)
_AMZ_DATE: Final = "%Y%m%dT%H%M%SZ"
_UNSIGNED_PAYLOAD: Final = "UNSIGNED-PAYLOAD"


@dataclass(frozen=True)
class Caller:
    """Who signed: what API Gateway puts in requestContext.identity."""

    access_key: str
    account_id: str
    caller: str
    user: str
    user_arn: str


@dataclass(frozen=True)
class SigningKey:
    secret_key: str
    caller: Caller
    session_token: str | None = None  # None: a long-term key, which no session token goes with
    token_required: bool = False  # temporary (STS) keys are valid only with their token


class AuthError(Exception):
    """A rejected request: HTTP status, x-amzn-ErrorType and the message API Gateway returns."""

    def __init__(self, error_type: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.status = status


def missing_token() -> AuthError:
    return AuthError("MissingAuthenticationTokenException", "Missing Authentication Token")


def invalid_token() -> AuthError:
    return AuthError("UnrecognizedClientException", "The security token included in the request is invalid.")


def _token_matches(key: SigningKey, token: str | None) -> bool:
    if token is None:
        return not key.token_required
    return key.session_token is not None and hmac.compare_digest(token, key.session_token)


_PART: Final = re.compile(r"(Credential|SignedHeaders|Signature)=([^,\s]+)")


def verify(
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    region: str,
    lookup: Callable[[str], SigningKey | None],
    now: datetime | None = None,
    service: str = "execute-api",
) -> Caller:
    """Return the verified caller, or raise ``AuthError`` as API Gateway would answer."""
    lowered = {key.lower(): value for key, value in headers.items()}
    authorization = lowered.get("authorization")
    if not authorization:
        raise missing_token()
    if not authorization.startswith(ALGORITHM + " "):
        raise AuthError(
            "IncompleteSignatureException",
            f"Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
            f"Authorization={authorization.split(' ')[0]}",
        )
    parts = dict(_PART.findall(authorization))
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if name not in parts]
    if missing:
        raise AuthError(
            "IncompleteSignatureException",
            " ".join(f"Authorization header requires '{name}' parameter." for name in missing)
            + f" Authorization={authorization}",
        )
    scope = parts["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise AuthError(
            "IncompleteSignatureException", f"Credential should be scoped correctly: {parts['Credential']}"
        )
    access_key, scope_date, scope_region, scope_service, _ = scope
    if scope_service != service:
        raise AuthError(
            "InvalidSignatureException", f"Credential should be scoped to correct service: '{service}'."
        )
    if scope_region != region:
        raise AuthError(
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region, not '{scope_region}'. ",
        )
    amz_date = _check_date(lowered.get("x-amz-date"), now or datetime.now(UTC))
    key = lookup(access_key)
    token = lowered.get("x-amz-security-token")
    if key is None or not _token_matches(key, token):
        raise invalid_token()

    content_hash = lowered.get("x-amz-content-sha256")
    if content_hash not in (None, _UNSIGNED_PAYLOAD) and content_hash != hashlib.sha256(body).hexdigest():
        raise AuthError(
            "InvalidSignatureException",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
            400,
        )
    signed_names = parts["SignedHeaders"].split(";")
    if "host" not in signed_names:
        raise AuthError(
            "InvalidSignatureException", "'Host' must be a 'SignedHeader' in the AWS Authorization."
        )
    request = AWSRequest(
        method=method.upper(),
        url=url,
        data=body,
        headers={name: lowered[name] for name in signed_names if name in lowered},
    )
    if content_hash is not None:
        request.headers["X-Amz-Content-SHA256"] = content_hash
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(access_key, key.secret_key), scope_service, scope_region)
    canonical = signer.canonical_request(request)
    string_to_sign = signer.string_to_sign(request, canonical)
    expected = signer.signature(string_to_sign, request)
    if scope_date != amz_date[:8] or not hmac.compare_digest(expected, parts["Signature"]):
        raise AuthError(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.\n\n"
            f"The Canonical String for this request should have been\n'{canonical}'\n\n"
            f"The String-to-Sign should have been\n'{string_to_sign}'\n",
        )
    return key.caller


def _check_date(amz_date: str | None, current: datetime) -> str:
    """The request's X-Amz-Date, when present, well formed and within 5 minutes of ``current``."""
    if amz_date is None:
        raise AuthError(
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        )
    try:
        signed_at = datetime.strptime(amz_date, _AMZ_DATE).replace(tzinfo=UTC)
    except ValueError:
        raise AuthError(
            "IncompleteSignatureException", f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'."
        ) from None
    if signed_at < current - MAX_SKEW:
        raise AuthError(
            "InvalidSignatureException",
            f"Signature expired: {amz_date} is now earlier than {(current - MAX_SKEW):{_AMZ_DATE}} "
            f"({current:{_AMZ_DATE}} - 5 min.)",
        )
    if signed_at > current + MAX_SKEW:
        raise AuthError(
            "InvalidSignatureException",
            f"Signature not yet current: {amz_date} is still later than {(current + MAX_SKEW):{_AMZ_DATE}} "
            f"({current:{_AMZ_DATE}} + 5 min.)",
        )
    return amz_date


def moto_credentials(
    account_id: str, sandbox_keys: Mapping[str, str], sandbox_token: str | None = None
) -> Callable[[str], SigningKey | None]:
    """Find an access key: the sandbox's own keys (account root; ``sandbox_token`` the one session
    token they accept), then moto's IAM users and STS sessions."""

    def lookup(access_key: str) -> SigningKey | None:
        if access_key in sandbox_keys:
            return SigningKey(
                sandbox_keys[access_key],
                Caller(access_key, account_id, account_id, account_id, f"arn:aws:iam::{account_id}:root"),
                session_token=sandbox_token,
            )
        for partition_backend in iam_backends[account_id].values():
            for user in partition_backend.users.values():
                for key in user.access_keys:
                    if key.access_key_id == access_key and key.status == "Active":
                        return SigningKey(
                            key.secret_access_key,
                            Caller(access_key, account_id, user.id, user.id, user.arn),
                        )
        for sts in sts_backends[account_id].values():
            for role in sts.assumed_roles:
                if role.access_key_id == access_key:
                    principal = str(role.user_id)
                    return SigningKey(
                        role.secret_access_key,
                        Caller(access_key, account_id, principal, principal, role.arn),
                        session_token=str(role.session_token),
                        token_required=True,
                    )
        return None

    return lookup
