"""The local API: the template's Api events served on 127.0.0.1, like ``sam local start-api``.

Each request becomes a real API Gateway REST proxy event (payload version 1.0) for the route's
function, run by the in-process runtime; the function's proxy response becomes the HTTP response.
Routes come from ``AWS::Serverless::Function`` Events of type Api (path parameters such as
``/clusters/{name}`` and greedy ``{proxy+}``, method ANY). Paths are served without the stage
prefix (as sam local does); a leading ``/<stage>`` is accepted too.

AWS_IAM routes verify SigV4 (service ``execute-api``, the sandbox region) with ``sandbox.emulator.sigv4``:
unsigned → 403 ``{"message":"Missing Authentication Token"}``, a wrong signature or a session token
that is not the key's → 403 with API Gateway's message; a verified caller fills
``requestContext.identity``. The verified caller must then be allowed ``execute-api:Invoke`` on the
request's ARN by its own IAM policies (sandbox.emulator.api_authorization; the sandbox's own keys are the
account root): else 403 ``AccessDeniedException`` ``{"Message": "User: <arn> is not authorized to
perform: execute-api:Invoke on resource: <arn>"}``; and ``lambda:InvokeFunction`` on the function
where SAM's integration invokes it with the caller's credentials: else 500 Internal server error.
Like API Gateway (its MISSING_AUTHENTICATION_TOKEN gateway response:
"an unsupported API method or resource"), an unknown path, and any method no route declares
(TRACE, PROPFIND, QUERY... too: never the HTTP server's 501), answers 403 Missing Authentication
Token; ``ANY`` stands for API Gateway's seven methods only. A body over API Gateway's 10 MB payload
limit answers 413 (REQUEST_TOO_LARGE) before it is read. A function error or a malformed proxy
response answers 502 ``{"message": "Internal server error"}`` (so does a response over Lambda's 6 MB
payload limit: the runtime fails it with ``Function.ResponseSizeTooLarge``, sandbox.emulator.lambda_runtime).

As API Gateway runs it: a function that has not answered after the integration timeout (29 s, the
REST API default) answers 504 ``{"message": "Endpoint request timed out"}`` while the function runs on
(Lambda does not stop it); requests past the stage's throttling (its MethodSettings rate and burst, a
token bucket per setting) or the account's (10,000 requests a second, a burst of 5,000, every API of
the server together) answer 429 ``{"message":"Too Many Requests"}`` before the function is invoked.
"""

from __future__ import annotations

import base64
import email.utils
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from sandbox.emulator.api_authorization import Authorizer, invoke_arn
from sandbox.emulator.aws_calls.policy import Decision, UnsupportedPolicy
from sandbox.emulator.deploy import ApiRoute, ApiSpec, Stack, Throttle
from sandbox.emulator.lambda_runtime import (
    SANDBOX_CREDENTIALS,
    FunctionThrottled,
    InvocationResult,
    LambdaRuntime,
)
from sandbox.emulator.sigv4 import AuthError, Caller, SigningKey, missing_token, moto_credentials, verify

_INTERNAL_ERROR: Final = {"message": "Internal server error"}
_TOO_LARGE: Final = {"message": "Request Too Large"}  # unverified wording, see docs/sandbox.md
_TIMED_OUT: Final = {"message": "Endpoint request timed out"}
_THROTTLED: Final = {"message": "Too Many Requests"}
# A REST API integration's default (and, without a quota increase, maximum) timeout: 29,000 ms.
INTEGRATION_TIMEOUT_SECONDS: Final = 29.0
# API Gateway's account-level throttling per Region (every API of the account together).
ACCOUNT_THROTTLE: Final = Throttle(rate=10_000.0, burst=5_000)
MAX_PAYLOAD_BYTES: Final = 10 * 1024 * 1024  # API Gateway REST APIs: 10 MB, not adjustable
# The methods API Gateway REST APIs define (``ANY`` is all seven); any other is no route's.
API_GATEWAY_METHODS: Final = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})


@dataclass(frozen=True)
class _CompiledRoute:
    api: ApiSpec
    route: ApiRoute
    pattern: re.Pattern[str]
    static_segments: int
    greedy: bool


def _compile(api: ApiSpec, route: ApiRoute) -> _CompiledRoute:
    regex = ""
    static = 0
    greedy = False
    for segment in [s for s in route.path.split("/") if s]:
        match = re.fullmatch(r"\{([A-Za-z0-9_.-]+)(\+?)\}", segment)
        if match is None:
            regex += "/" + re.escape(segment)
            static += 1
        elif match.group(2):
            regex += f"/(?P<{_group(match.group(1))}>.+)"
            greedy = True
        else:
            regex += f"/(?P<{_group(match.group(1))}>[^/]+)"
    return _CompiledRoute(api, route, re.compile(f"^{regex or '/'}/?$"), static, greedy)


class TokenBucket:
    """API Gateway's throttling: ``burst`` tokens, refilled at ``rate`` a second; a request takes one."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at = now
        self._lock = threading.Lock()

    def take(self, now: float) -> bool:
        with self._lock:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


def _group(name: str) -> str:
    return "p_" + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group(0)):x}_", name)


def _ungroup(group: str) -> str:
    return re.sub(r"_([0-9a-f]+)_", lambda m: chr(int(m.group(1), 16)), group.removeprefix("p_"))


class ApiServer:
    """ThreadingHTTPServer serving every API of the stack (start/stop; ``url`` once constructed)."""

    def __init__(
        self,
        stack: Stack,
        runtime: LambdaRuntime,
        *,
        host: str = "127.0.0.1",
        port: int = 3000,
        lookup: Callable[[str], SigningKey | None] | None = None,
        clock: Callable[[], datetime] | None = None,
        dates: Callable[[], datetime] | None = None,
        integration_timeout: float = INTEGRATION_TIMEOUT_SECONDS,
        account_throttle: Throttle = ACCOUNT_THROTTLE,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stack = stack
        self.runtime = runtime
        self.lookup = lookup or moto_credentials(
            stack.account_id,
            {SANDBOX_CREDENTIALS["AWS_ACCESS_KEY_ID"]: SANDBOX_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]},
            SANDBOX_CREDENTIALS["AWS_SESSION_TOKEN"],
        )
        self.now = clock or (lambda: datetime.now(UTC))  # SigV4's: the caller signs with the wall clock
        # The Date header: the API's own time, that of the records it answers (the sandbox clock)
        self.dates = dates or self.now
        # wall seconds: a function runs at wall speed (simulated time passes at x1 while it works)
        self.integration_timeout = integration_timeout
        self._monotonic = monotonic
        self._account_throttle = account_throttle
        self._account_bucket = self._bucket(account_throttle)
        self._buckets: dict[tuple[str, str, str], TokenBucket] = {}
        self._buckets_lock = threading.Lock()
        self.routes = sorted(
            (_compile(api, route) for api in stack.apis.values() for route in api.routes),
            key=lambda r: (r.greedy, -r.static_segments, r.route.path.count("{")),
        )
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "SandboxApiGateway"

            def _serve(self) -> None:
                server.handle(self)

            def __getattr__(self, name: str) -> Any:
                # http.server answers 501 for a method without a do_<METHOD>: every method is ours
                if name.startswith("do_"):
                    return self._serve
                raise AttributeError(name)

            def log_message(self, format: str, *args: Any) -> None:
                sys.stderr.write(f"[api] {self.address_string()} {format % args}\n")

            def date_time_string(self, timestamp: float | None = None) -> str:
                return email.utils.format_datetime(server.dates().astimezone(UTC), usegmt=True)

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        bound_host, bound_port = self._httpd.server_address[:2]
        self.url = f"http://{bound_host!s}:{bound_port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="sandbox-api", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    # request handling --------------------------------------------------------------------------
    def match(self, method: str, path: str) -> tuple[_CompiledRoute, dict[str, str], str] | None:
        """The route, its path parameters, and the path it matched (``path`` without the stage)."""
        for candidate in (path, *self._without_stage(path)):
            for compiled in self.routes:
                found = compiled.pattern.match(candidate)
                declared = compiled.route.method == method or (
                    compiled.route.method == "ANY" and method in API_GATEWAY_METHODS
                )
                if found and declared:
                    params = {_ungroup(k): unquote(v) for k, v in found.groupdict().items()}
                    return compiled, params, candidate
        return None

    def _bucket(self, throttle: Throttle) -> TokenBucket:
        # a member the stage's setting leaves out is the account's
        account = self._account_throttle
        rate = next(r for r in (throttle.rate, account.rate, ACCOUNT_THROTTLE.rate) if r is not None)
        burst = next(b for b in (throttle.burst, account.burst, ACCOUNT_THROTTLE.burst) if b is not None)
        return TokenBucket(rate, burst, self._monotonic())

    def admit(self, route: ApiRoute) -> bool:
        """Whether throttling lets a request of ``route`` through: the method's own MethodSettings,
        else the stage's ``/*`` ``*`` ones (one bucket for the whole stage), then the account's."""
        api = self.stack.apis[route.api_logical_id]
        for key in ((route.path, route.method), (route.path, "*"), ("/*", "*")):
            throttle = api.throttling.get(key)
            if throttle is not None:
                with self._buckets_lock:
                    bucket = self._buckets.get((api.logical_id, *key))
                    if bucket is None:
                        bucket = self._buckets[(api.logical_id, *key)] = self._bucket(throttle)
                if not bucket.take(self._monotonic()):
                    return False
                break
        return self._account_bucket.take(self._monotonic())

    def _without_stage(self, path: str) -> list[str]:
        stages = {api.stage for api in self.stack.apis.values()}
        return [path[len(stage) + 1 :] or "/" for stage in stages if path.startswith(f"/{stage}/")]

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        request_id = str(uuid.uuid4())
        length = int(request.headers.get("Content-Length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            request.close_connection = True  # the unread body must not be taken for the next request
            self._reply(request, 413, _TOO_LARGE, request_id, error_type="RequestTooLargeException")
            return
        body = request.rfile.read(length) if length else b""
        split = urlsplit(request.path)
        matched = self.match(request.command, split.path)
        if matched is None:
            self._reply(
                request,
                missing_token().status,
                {"message": missing_token().message},
                request_id,
                error_type=missing_token().error_type,
            )
            return
        compiled, path_parameters, route_path = matched
        if not self.admit(compiled.route):
            self._reply(request, 429, _THROTTLED, request_id, error_type="TooManyRequestsException")
            return
        caller: Caller | None = None
        if compiled.route.auth == "AWS_IAM":
            host = request.headers.get("Host", "")
            try:
                caller = verify(
                    method=request.command,
                    url=f"http://{host}{request.path}",
                    headers=dict(request.headers.items()),
                    body=body,
                    region=self.stack.region,
                    lookup=self.lookup,
                    now=self.now(),
                )
            except AuthError as error:
                self._reply(
                    request, error.status, {"message": error.message}, request_id, error_type=error.error_type
                )
                return
            if not self._authorized(request, compiled, route_path, caller, request_id):
                return
        event = self.proxy_event(
            request,
            compiled=compiled,
            path_parameters=path_parameters,
            body=body,
            caller=caller,
            request_id=request_id,
        )
        try:
            result = self._invoke(compiled.route.function_logical_id, event)
        except FunctionThrottled:
            # Lambda's 429 (reserved concurrency) is an integration failure to API Gateway: a 500
            sys.stderr.write(f"[api] {compiled.route.function_logical_id} throttled: 500\n")
            self._reply(request, 500, _INTERNAL_ERROR, request_id, error_type="InternalServerErrorException")
            return
        if result is None:
            sys.stderr.write(
                f"[api] {compiled.route.function_logical_id} did not answer within "
                f"{self.integration_timeout:g} s: 504\n"
            )
            self._reply(request, 504, _TIMED_OUT, request_id, error_type="InternalServerErrorException")
            return
        if not result.ok:
            sys.stderr.write(
                f"[api] {compiled.route.function_logical_id} failed: {result.payload.decode()}\n"
            )
            self._reply(request, 502, _INTERNAL_ERROR, request_id, error_type="InternalServerErrorException")
            return
        self._proxy_reply(request, result.json(), request_id)

    def _authorized(
        self,
        request: BaseHTTPRequestHandler,
        compiled: _CompiledRoute,
        route_path: str,
        caller: Caller,
        request_id: str,
    ) -> bool:
        """Whether the caller's IAM policies let the request through; if not, the answer is sent."""
        api, route, region = compiled.api, compiled.route, self.stack.region
        api_path = f"{region}:{self.stack.account_id}:{api.api_id}"
        resource = invoke_arn(api_path, api.stage, request.command, route_path)
        try:
            authorizer = Authorizer(caller)
            denied = authorizer.invoke_denied(resource, region)
            function = self.stack.functions[route.function_logical_id].arn
            lambda_denied = (
                route.caller_credentials
                and authorizer.decide("lambda:InvokeFunction", function, region) is not Decision.ALLOWED
            )
        except UnsupportedPolicy as error:  # neither allowed nor denied silently
            sys.stderr.write(f"[api] {caller.user_arn}'s policies: {error}: 500\n")
            self._reply(request, 500, _INTERNAL_ERROR, request_id, error_type="InternalServerErrorException")
            return False
        if denied is not None:
            self._reply(request, 403, {"Message": denied}, request_id, error_type="AccessDeniedException")
            return False
        if lambda_denied:
            # API Gateway's execution log; the caller sees only a 500
            sys.stderr.write(
                f"[api] {caller.user_arn} may not lambda:InvokeFunction {function}: Execution failed due to "
                "configuration error: Invalid permissions on Lambda function: 500\n"
            )
            self._reply(request, 500, _INTERNAL_ERROR, request_id, error_type="InternalServerErrorException")
            return False
        return True

    def _invoke(self, function: str, event: dict[str, Any]) -> InvocationResult | None:
        """The function's result, or None when it has not answered within the integration timeout
        (it runs on, as Lambda lets it, to its own timeout)."""
        outcome: list[InvocationResult | BaseException] = []
        done = threading.Event()

        def run() -> None:
            try:
                outcome.append(self.runtime.invoke(function, event))
            except BaseException as error:  # noqa: BLE001 - raised again in the request's thread
                outcome.append(error)
            finally:
                done.set()

        threading.Thread(target=run, name=f"api-{function}", daemon=True).start()
        if not done.wait(self.integration_timeout):
            return None
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def proxy_event(
        self,
        request: BaseHTTPRequestHandler,
        *,
        compiled: _CompiledRoute,
        path_parameters: dict[str, str],
        body: bytes,
        caller: Caller | None,
        request_id: str,
    ) -> dict[str, Any]:
        """The API Gateway REST proxy event (payload format 1.0)."""
        split = urlsplit(request.path)
        path = unquote(split.path)
        api = compiled.api
        stage_prefix = f"/{api.stage}/"
        if path.startswith(stage_prefix) and not compiled.pattern.match(split.path):
            path = path[len(stage_prefix) - 1 :]
        headers: dict[str, str] = {}
        multi_headers: dict[str, list[str]] = {}
        for name, value in request.headers.items():
            headers[name] = value
            multi_headers.setdefault(name, []).append(value)
        query: dict[str, str] = {}
        multi_query: dict[str, list[str]] = {}
        for name, value in parse_qsl(split.query, keep_blank_values=True):
            query[name] = value
            multi_query.setdefault(name, []).append(value)
        try:
            text_body: str | None = body.decode("utf-8") if body else None
            is_base64 = False
        except UnicodeDecodeError:
            text_body, is_base64 = base64.b64encode(body).decode(), True
        now = datetime.now(UTC)
        source_ip = request.client_address[0]
        return {
            "resource": compiled.route.path,
            "path": path,
            "httpMethod": request.command,
            "headers": headers or None,
            "multiValueHeaders": multi_headers or None,
            "queryStringParameters": query or None,
            "multiValueQueryStringParameters": multi_query or None,
            "pathParameters": path_parameters or None,
            "stageVariables": None,
            "requestContext": {
                "resourceId": compiled.route.resource_id,
                "resourcePath": compiled.route.path,
                "httpMethod": request.command,
                "extendedRequestId": base64.b64encode(uuid.uuid4().bytes[:12]).decode(),
                "requestTime": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "path": f"/{api.stage}{path}",
                "accountId": self.stack.account_id,
                "protocol": request.request_version,
                "stage": api.stage,
                "domainPrefix": api.api_id,
                "requestTimeEpoch": int(now.timestamp() * 1000),
                "requestId": request_id,
                "identity": {
                    "cognitoIdentityPoolId": None,
                    "accountId": caller.account_id if caller else None,
                    "cognitoIdentityId": None,
                    "caller": caller.caller if caller else None,
                    "sourceIp": source_ip,
                    "principalOrgId": None,
                    "accessKey": caller.access_key if caller else None,
                    "cognitoAuthenticationType": None,
                    "cognitoAuthenticationProvider": None,
                    "userArn": caller.user_arn if caller else None,
                    "userAgent": request.headers.get("User-Agent"),
                    "user": caller.user if caller else None,
                },
                "domainName": request.headers.get("Host", ""),
                "apiId": api.api_id,
            },
            "body": text_body,
            "isBase64Encoded": is_base64,
        }

    def _proxy_reply(self, request: BaseHTTPRequestHandler, response: Any, request_id: str) -> None:
        if not isinstance(response, dict) or not isinstance(response.get("statusCode"), int):
            sys.stderr.write(f"[api] malformed Lambda proxy response: {response!r}\n")
            self._reply(request, 502, _INTERNAL_ERROR, request_id, error_type="InternalServerErrorException")
            return
        body = response.get("body")
        raw = b"" if body is None else str(body).encode()
        if response.get("isBase64Encoded") and body is not None:
            raw = base64.b64decode(str(body))
        headers: list[tuple[str, str]] = [
            (str(k), str(v)) for k, v in (response.get("headers") or {}).items()
        ]
        for name, values in (response.get("multiValueHeaders") or {}).items():
            headers.extend((str(name), str(v)) for v in values)
        self._send(request, int(response["statusCode"]), raw, headers, request_id)

    def _reply(
        self, request: BaseHTTPRequestHandler, status: int, payload: Any, request_id: str, *, error_type: str
    ) -> None:
        self._send(
            request,
            status,
            json.dumps(payload).encode(),
            [("Content-Type", "application/json"), ("x-amzn-ErrorType", error_type)],
            request_id,
        )

    @staticmethod
    def _send(
        request: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]],
        request_id: str,
    ) -> None:
        request.send_response(status)
        names = {name.lower() for name, _ in headers}
        for name, value in headers:
            request.send_header(name, value)
        if "content-type" not in names:
            request.send_header("Content-Type", "application/json")
        request.send_header("x-amzn-RequestId", request_id)
        request.send_header("x-amz-apigw-id", base64.b64encode(uuid.uuid4().bytes[:6]).decode())
        request.send_header("X-Amzn-Trace-Id", f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}")
        request.send_header("Content-Length", str(len(body)))
        if request.close_connection:
            request.send_header("Connection", "close")
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)
