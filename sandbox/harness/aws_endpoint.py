"""The Sandbox's AWS endpoint: moto's server app (as ThreadedMotoServer runs it) on a loopback port,
sharing this process's backends and simulators, with the Sandbox's admin routes under /_sandbox/.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from sandbox.harness.core import Sandbox


ADMIN_PREFIX: Final = "/_sandbox/"


class AwsEndpoint:
    """moto's werkzeug app (as ThreadedMotoServer runs it), sharing this process's backends.

    Requests under /_sandbox/ go to ``Sandbox.admin`` (faults, clock, metrics, stack); every other
    request is an AWS API call answered by moto and the simulators. Bound to loopback, no auth on
    the admin routes: it is a local development endpoint.
    """

    def __init__(self, sandbox: Sandbox, host: str, port: int) -> None:
        self.sandbox = sandbox
        self._moto_app = DomainDispatcherApplication(create_backend_app)
        self._server: BaseWSGIServer = make_server(
            host, port, self._app, threaded=True, request_handler=MotoRequestHandler
        )
        bound_host, bound_port = self._server.server_address[:2]
        self.url = f"http://{bound_host!s}:{bound_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="sandbox-aws-endpoint", daemon=True
        )

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if not path.startswith(ADMIN_PREFIX):
            calls = self.sandbox.aws_calls
            # a lost response's request is served, its answer dropped, before the fault answers
            fault = calls.http_answer(environ, lambda: b"".join(self._aws(environ, _drop))) if calls else None
            if fault is not None:
                return Response(fault.body, fault.status, fault.headers)(environ, start_response)
            return self._aws(environ, start_response)
        request = Request(environ)
        try:
            body = json.loads(request.get_data() or b"null")
        except ValueError:
            response = Response(json.dumps({"error": "body is not JSON"}), 400, mimetype="application/json")
            return response(environ, start_response)
        status, payload = self.sandbox.admin(request.method, path, body)
        response = Response(json.dumps(payload, default=str), status, mimetype="application/json")
        return response(environ, start_response)

    def _aws(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        simulators = self.sandbox.simulators
        priced = simulators.pricing.wsgi_answer(environ) if simulators is not None else None
        if priced is not None:  # moto's server has no pricing backend
            status, headers, body = priced
            return Response(body, status, headers)(environ, start_response)
        return self._moto_app(environ, start_response)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def _drop(*_: Any) -> Callable[[bytes], None]:
    """A WSGI start_response for an answer nobody receives."""
    return lambda _data: None
