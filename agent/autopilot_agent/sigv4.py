"""AWS Signature Version 4 for one JSON POST (service ``execute-api``), standard library only.

The same algorithm botocore's ``SigV4Auth`` runs (tests/unit/test_agent_sigv4.py compares the two):
canonical request -> string to sign -> HMAC-SHA256 chain over date, region, service, ``aws4_request``.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Dict, Mapping, Optional
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    access_key: str,
    secret_key: str,
    session_token: Optional[str],
    region: str,
    service: str,
    now: datetime,
) -> Dict[str, str]:
    """The headers to send: ``headers`` plus Host, X-Amz-Date, X-Amz-Security-Token and Authorization.

    ``now`` is UTC (naive or aware). Every header given is signed (send no hop-by-hop headers through here).
    """
    parts = urlsplit(url)
    amz_date = now.strftime(AMZ_DATE_FORMAT)
    signed: Dict[str, str] = dict(headers)
    signed["Host"] = parts.netloc
    signed["X-Amz-Date"] = amz_date
    if session_token:
        signed["X-Amz-Security-Token"] = session_token
    canonical_headers = {name.lower(): " ".join(value.split()) for name, value in signed.items()}
    names = sorted(canonical_headers)
    # the query as sent (already percent-encoded), pairs sorted: botocore's canonical query string
    query = "&".join(
        "=".join(pair)
        for pair in sorted(piece.partition("=")[::2] for piece in parts.query.split("&") if piece)
    )
    canonical_request = "\n".join(
        [
            method.upper(),
            # API Gateway wants the path URI-encoded once more, as botocore does (safe: / and ~)
            quote(parts.path or "/", safe="/~"),
            query,
            "".join(f"{name}:{canonical_headers[name]}\n" for name in names),
            ";".join(names),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()]
    )
    key = _hmac(("AWS4" + secret_key).encode("utf-8"), amz_date[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, string_to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    signed["Authorization"] = (
        f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
    )
    return signed
