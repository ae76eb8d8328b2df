"""HTTP client for the Autopilot REST API, signing every request with SigV4 (service execute-api).

Credentials come from the standard chain (environment, profile, SSO, instance role...) through
botocore. The region to sign for is the one in the endpoint's ``execute-api.<region>`` host when it
has one: API Gateway refuses a signature scoped to any other region, whatever the profile says.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TextIO
from urllib.parse import quote, urlencode, urlsplit

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.session import Session as BotocoreSession

SERVICE = "execute-api"
IDEMPOTENCY_HEADER = "Idempotency-Key"
TERMINAL_STATUSES = ("SUCCEEDED", "FAILED")
# https://{api-id}.execute-api.{region}.amazonaws.com[.cn]/{stage}
_EXECUTE_API_HOST = re.compile(
    r"^[a-z0-9]+\.execute-api\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$"
)


class ClientError(Exception):
    """The client could not make the call (no credentials, no region, endpoint unreachable)."""


class ApiError(Exception):
    """The API answered with an error; ``errors`` locate each problem when the API named them."""

    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []
        self.operation_id: str | None = None

    @property
    def is_client_error(self) -> bool:
        return 400 <= self.status < 500


class WaitTimeoutError(Exception):
    """The operation was still running at the caller's deadline."""

    def __init__(self, operation: dict[str, Any]) -> None:
        super().__init__(
            f"operation {operation.get('operationId')} still {operation.get('status')} at the deadline"
        )
        self.operation = operation


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` if it is an http(s) URL with a host; else ValueError saying what to give instead."""
    parts = urlsplit(endpoint)
    if parts.scheme in ("http", "https") and parts.hostname:
        return endpoint
    if not parts.scheme or not parts.hostname:  # no scheme; localhost:3000 parses as scheme "localhost"
        guess = "http" if endpoint.startswith(("127.", "localhost")) else "https"
        raise ValueError(f"{endpoint!r} is not a URL: give its scheme, e.g. {guess}://{endpoint}")
    raise ValueError(f"{endpoint!r}: the API's URL is http:// or https://, not {parts.scheme}://")


def region_from_endpoint(endpoint: str) -> str | None:
    """The region of an ``execute-api`` endpoint; None for a custom domain or a local API."""
    found = _EXECUTE_API_HOST.match(urlsplit(endpoint).hostname or "")
    return found.group(1) if found else None


RETRIED_STATUSES = frozenset({429, 502, 503, 504})


def _date_header(response: Any) -> datetime | None:
    value = (getattr(response, "headers", None) or {}).get("Date")
    try:
        return email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError):
        return None


def _shortened(data: bytes | str, limit: int = 2000) -> str:
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class AutopilotClient:
    def __init__(
        self,
        endpoint: str,
        *,
        region: str | None = None,
        credentials: Credentials | None = None,
        session: BotocoreSession | None = None,
        http: urllib3.PoolManager | None = None,
        timeout_seconds: float = 30.0,
        debug: TextIO | None = None,
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._debug = debug  # --debug: each request and answer, without the signature
        # The API's own time (its Date header), that of the records it answers: --wait measures with it,
        # so a clock that is not the caller's (a sandbox's) never mixes with the caller's.
        self.server_now: datetime | None = None
        botocore_session = session or BotocoreSession()
        resolved_region = (
            region or region_from_endpoint(endpoint) or botocore_session.get_config_variable("region")
        )
        if not resolved_region:
            raise ClientError("no AWS region: pass --region or set AWS_REGION / a profile region")
        self.region: str = str(resolved_region)
        found = credentials or botocore_session.get_credentials()
        if found is None:
            raise ClientError("no AWS credentials found (environment, profile, SSO or instance role)")
        self._credentials: Credentials = found
        # POST is retried too: every POST this client sends is safe to repeat (POST /clusters and the
        # node repairs carry an Idempotency-Key, POST /validate changes nothing).
        # A throttled (429) or unavailable (502-504, API Gateway's and the API's own) answer is retried
        # too, after Retry-After when there is one, as the AWS SDKs retry throttling.
        retries = urllib3.Retry(
            total=3,
            backoff_factor=0.5,
            allowed_methods=urllib3.Retry.DEFAULT_ALLOWED_METHODS | {"POST"},
            status_forcelist=RETRIED_STATUSES,
            raise_on_status=False,
        )
        self._http = http or urllib3.PoolManager(retries=retries)
        self._timeout = timeout_seconds

    # --- transport ------------------------------------------------------------------------

    def signed_request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> AWSRequest:
        """The request as it goes on the wire, signed for the endpoint's region."""
        url = f"{self._endpoint}{path}"
        if query:
            url += "?" + urlencode(query)
        data = json.dumps(body).encode() if body is not None else b""
        sent = {"Accept": "application/json", **(headers or {})}
        if body is not None:
            sent["Content-Type"] = "application/json"
        request = AWSRequest(method=method, url=url, data=data, headers=sent)
        SigV4Auth(self._credentials.get_frozen_credentials(), SERVICE, self.region).add_auth(request)
        return request

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        request = self.signed_request(method, path, body=body, query=query, headers=headers)
        started = time.monotonic()
        if self._debug:
            print(f"debug: > {method} {request.url} (signed for {self.region})", file=self._debug)
            if request.body:
                print(f"debug: > {_shortened(request.body)}", file=self._debug)
        try:
            response = self._http.request(
                method,
                str(request.url),
                body=request.body or None,
                headers=dict(request.headers.items()),
                timeout=self._timeout,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ClientError(f"cannot reach {self._endpoint}: {exc}") from exc
        text = response.data.decode("utf-8", errors="replace")
        self.server_now = _date_header(response) or self.server_now
        if self._debug:
            request_id = (getattr(response, "headers", None) or {}).get("x-amzn-RequestId", "-")
            took = (time.monotonic() - started) * 1000
            print(f"debug: < {response.status} in {took:.0f} ms, request id {request_id}", file=self._debug)
            print(f"debug: < {_shortened(text)}", file=self._debug)
        try:
            payload = json.loads(text) if text else {}
        except ValueError:
            payload = {"message": text.strip() or f"HTTP {response.status}"}
        if response.status >= 400:
            error = ApiError(
                response.status,
                str(payload.get("message") or payload.get("Message") or f"HTTP {response.status}"),
                payload.get("errors") if isinstance(payload.get("errors"), list) else None,
            )
            error.operation_id = payload.get("operationId")
            raise error
        return payload

    # --- API ------------------------------------------------------------------------------

    def create_cluster(self, body: dict[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        """POST /clusters; retries (the transport's and the caller's, with the same key) are answered
        with the first request's operation. Without a key, each call gets a new one."""
        headers = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        result: dict[str, Any] = self.call("POST", "/clusters", body=body, headers=headers)
        return result

    def plan_create(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /clusters?dryRun=true: the checks a create makes and what it would send; creates nothing."""
        result: dict[str, Any] = self.call("POST", "/clusters", body=body, query={"dryRun": "true"})
        return result

    def validate(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.call("POST", "/validate", body=body)
        return result

    def list_clusters(self, *, include_deleted: bool = False) -> Iterator[dict[str, Any]]:
        query = {"includeDeleted": "true"} if include_deleted else {}
        yield from self._pages("/clusters", "clusters", query)

    def get_cluster(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/clusters/{quote(name, safe='')}")
        return result

    def list_nodes(self, name: str) -> Iterator[dict[str, Any]]:
        yield from self._pages(f"/clusters/{quote(name, safe='')}/nodes", "nodes", {})

    def delete_cluster(
        self, name: str, *, stack_name: str | None = None, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """DELETE /clusters/{name}, with an Idempotency-Key as for create_cluster."""
        query = {"stackName": stack_name} if stack_name else None
        headers = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        result: dict[str, Any] = self.call(
            "DELETE", f"/clusters/{quote(name, safe='')}", query=query, headers=headers
        )
        return result

    def reboot_node(self, name: str, node_id: str, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """POST /clusters/{name}/nodes/{nodeId}/reboot: a ReplaceNode operation, as healing starts one,
        with an Idempotency-Key as for create_cluster."""
        return self._repair_node(name, node_id, "reboot", idempotency_key)

    def replace_node(self, name: str, node_id: str, *, idempotency_key: str | None = None) -> dict[str, Any]:
        """POST /clusters/{name}/nodes/{nodeId}/replace."""
        return self._repair_node(name, node_id, "replace", idempotency_key)

    def _repair_node(
        self, name: str, node_id: str, action: str, idempotency_key: str | None
    ) -> dict[str, Any]:
        path = f"/clusters/{quote(name, safe='')}/nodes/{quote(node_id, safe='')}/{action}"
        headers = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        result: dict[str, Any] = self.call("POST", path, headers=headers)
        return result

    def lift_growth_block(self, name: str) -> dict[str, Any]:
        """DELETE /clusters/{name}/growth-block: the cluster may scale up again before its budget period
        ends (block-growth enforcement)."""
        result: dict[str, Any] = self.call("DELETE", f"/clusters/{quote(name, safe='')}/growth-block")
        return result

    def scale_instance_group(self, name: str, group: str, *, instance_count: int) -> dict[str, Any]:
        """PUT /clusters/{name}/instance-groups/{group}: set a worker group's instance count (a scale-up
        is refused while block-growth holds the cluster)."""
        path = f"/clusters/{quote(name, safe='')}/instance-groups/{quote(group, safe='')}"
        result: dict[str, Any] = self.call("PUT", path, body={"instanceCount": instance_count})
        return result

    def list_operations(self, name: str, *, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """GET /clusters/{name}/operations, newest first."""
        query = {"kind": kind} if kind else {}
        yield from self._pages(f"/clusters/{quote(name, safe='')}/operations", "operations", query)

    def get_healing(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/clusters/{quote(name, safe='')}/healing")
        return result

    def set_healing(self, name: str, *, paused: bool, reason: str | None = None) -> dict[str, Any]:
        """PUT /clusters/{name}/healing: pause (with an optional reason) or resume self-healing."""
        body: dict[str, Any] = {"paused": paused}
        if reason is not None:
            body["reason"] = reason
        result: dict[str, Any] = self.call("PUT", f"/clusters/{quote(name, safe='')}/healing", body=body)
        return result

    def get_cost(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/clusters/{quote(name, safe='')}/cost")
        return result

    def get_usage(self, name: str, *, by: str = "account", month: str | None = None) -> dict[str, Any]:
        """GET /clusters/{name}/usage: the month's spend per Slurm account or user, and the unused."""
        query = {"by": by} | ({"month": month} if month else {})
        result: dict[str, Any] = self.call("GET", f"/clusters/{quote(name, safe='')}/usage", query=query)
        return result

    def set_account_budgets(self, name: str, budgets: dict[str, float]) -> dict[str, Any]:
        """PUT /clusters/{name}/account-budgets: the cluster's department budgets, all replaced."""
        result: dict[str, Any] = self.call(
            "PUT",
            f"/clusters/{quote(name, safe='')}/account-budgets",
            body={"accountBudgets": budgets},
        )
        return result

    def get_operation(self, operation_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/operations/{quote(operation_id, safe='')}")
        return result

    def wait_for_operation(
        self,
        operation_id: str,
        *,
        timeout_seconds: float,
        poll_seconds: float = 5.0,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> dict[str, Any]:
        """Poll GET /operations/{id} until SUCCEEDED/FAILED; WaitTimeoutError at the deadline."""
        deadline = monotonic() + timeout_seconds
        while True:
            operation = self.get_operation(operation_id)
            if on_progress is not None:
                on_progress(operation)
            if operation.get("status") in TERMINAL_STATUSES:
                return operation
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise WaitTimeoutError(operation)
            sleep(min(poll_seconds, remaining))

    def _pages(self, path: str, key: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page_query = dict(query)
            if token:
                page_query["nextToken"] = token
            page = self.call("GET", path, query=page_query or None)
            yield from page.get(key, [])
            token = page.get("nextToken")
            if not token:
                return
