"""One signed round trip: POST {apiUrl}/agent/{cluster}/reports -> the commands pending for the cluster.

Retries what AWS's SDKs retry (429, 5xx, a connection that failed or timed out) with capped exponential
backoff and full jitter, so a control plane coming back is not met by every agent at once. A 403 for a
signature outside API Gateway's 5-minute window ("Signature expired" / "not yet current") means the
node's clock is off: like the SDKs, the clock offset is set from the response's Date header and the
request signed again, once.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from . import VERSION, sigv4
from .config import Config
from .credentials import CredentialsError, CredentialSource

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 35.0  # API Gateway gives up on its integration after 29 s
RETRYABLE = frozenset({429, 500, 502, 503, 504})
# API Gateway tells a skewed clock from a wrong signature only in the message (both InvalidSignatureException)
_SKEW_MESSAGES = ("Signature expired", "Signature not yet current")
_TOKEN_ERRORS = frozenset({"ExpiredTokenException", "UnrecognizedClientException"})


class Response(NamedTuple):
    status: int
    headers: Mapping[str, str]
    body: bytes


Transport = Callable[[str, Mapping[str, str], bytes], Response]
"""POST url with headers and body; raise OSError when no response came (the HTTP boundary)."""


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


def urllib_transport(url: str, headers: Mapping[str, str], body: bytes) -> Response:
    # the URL's scheme is http(s): config.load checked apiUrl
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as reply:  # noqa: S310
            return Response(reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())


class ReportClient:
    def __init__(
        self,
        config: Config,
        credentials: CredentialSource,
        transport: Transport = urllib_transport,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 20.0,
    ) -> None:
        self.config = config
        self.credentials = credentials
        self.transport = transport
        self._now = now
        self._monotonic = monotonic
        self._sleep = sleep
        self._jitter = jitter
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.clock_offset = timedelta(0)  # added to the local clock when signing
        self._server_date: Optional[Tuple[datetime, float]] = None

    def server_now(self) -> datetime:
        """The API's clock: its last Date header plus the time elapsed since (the local clock before any).

        Command deadlines are the control plane's times, so they are compared with its clock, not the node's.
        """
        if self._server_date is None:
            return self.signing_now()
        date, at = self._server_date
        return date + timedelta(seconds=self._monotonic() - at)

    def send(self, report: Mapping[str, Any]) -> Dict[str, Any]:
        """POST the report; the 200 answer's JSON. ApiError when refused or when retries run out."""
        body = json.dumps(report, separators=(",", ":")).encode("utf-8")
        skew_fixed = token_refreshed = False
        attempt = 0
        while True:
            attempt += 1
            try:
                headers = self._signed_headers(body)
            except CredentialsError as error:
                raise ApiError(0, f"credentials: {error}") from None
            try:
                response = self.transport(self.config.reports_url, headers, body)
            except OSError as error:
                failure: ApiError = ApiError(0, f"no response: {error}")
            else:
                self._note_date(response.headers)
                if response.status == 200:
                    return _json_object(response.body)
                failure = ApiError(response.status, _message(response.body))
                error_type = _error_type(response.headers)
                if error_type == "InvalidSignatureException" and not skew_fixed and _is_skew(failure.message):
                    skew_fixed = True
                    if self._fix_skew(response.headers):
                        attempt -= 1
                        continue
                if error_type in _TOKEN_ERRORS and not token_refreshed:
                    # instance credentials rotated under us: fetch them again, once
                    token_refreshed = True
                    self.credentials.invalidate()
                    attempt -= 1
                    continue
                if response.status not in RETRYABLE:
                    raise failure
            if attempt >= self.max_attempts:
                raise failure
            delay = self._jitter() * min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))
            log.warning("report failed (%s); retrying in %.1f s", failure, delay)
            self._sleep(delay)

    def signing_now(self) -> datetime:
        """The local clock, corrected by the offset a skew error taught."""
        return self._now() + self.clock_offset

    def _signed_headers(self, body: bytes) -> Dict[str, str]:
        creds = self.credentials.get()
        headers = sigv4.sign(
            "POST",
            self.config.reports_url,
            {"Content-Type": "application/json"},
            body,
            access_key=creds.access_key,
            secret_key=creds.secret_key,
            session_token=creds.token,
            region=self.config.region,
            service="execute-api",
            now=self.signing_now(),
        )
        headers["User-Agent"] = f"autopilot-agent/{VERSION}"  # unsigned, as the SDKs leave it
        return headers

    def _note_date(self, headers: Mapping[str, str]) -> None:
        date = _parse_date(headers)
        if date is not None:
            self._server_date = (date, self._monotonic())

    def _fix_skew(self, headers: Mapping[str, str]) -> bool:
        date = _parse_date(headers)
        if date is None:
            return False
        self.clock_offset = date - self._now()
        log.warning(
            "the node's clock is %.0f s off the API's; signing with the API's time",
            -self.clock_offset.total_seconds(),
        )
        return True


def _parse_date(headers: Mapping[str, str]) -> Optional[datetime]:
    value = {k.lower(): v for k, v in headers.items()}.get("date")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _error_type(headers: Mapping[str, str]) -> str:
    # API Gateway's x-amzn-ErrorType, e.g. "InvalidSignatureException:http://internal.amazon.com/..."
    value = {k.lower(): v for k, v in headers.items()}.get("x-amzn-errortype", "")
    return value.split(":", 1)[0]


def _is_skew(message: str) -> bool:
    return any(text in message for text in _SKEW_MESSAGES)


def _message(body: bytes) -> str:
    try:
        decoded = json.loads(body.decode("utf-8"))
    except ValueError:
        return body.decode("utf-8", "replace")[:500]
    if isinstance(decoded, dict):
        return str(decoded.get("message") or decoded.get("Message") or decoded)[:500]
    return str(decoded)[:500]


def _json_object(body: bytes) -> Dict[str, Any]:
    try:
        decoded = json.loads(body.decode("utf-8"))
    except ValueError:
        raise ApiError(200, "the API answered with something that is not JSON") from None
    if not isinstance(decoded, dict):
        raise ApiError(200, "the API answered with JSON that is not an object")
    return decoded
