"""The moto seam: SageMaker's HyperPod operations are answered by the registered simulators.

moto dispatches a SageMaker request (in-process through ``mock_aws``'s botocore stubber, or over
HTTP through ``ThreadedMotoServer``) to ``SageMakerResponse.dispatch``, which calls the method named
after the action (``create_cluster``...) on a fresh ``SageMakerResponse`` whose ``params`` hold the
request parsed with botocore's model. ``install_sagemaker_seam`` sets one such method per HyperPod
operation on that class; uninstalling restores moto's own (or removes what moto lacks). The seam's
assumptions about moto are pinned by tests/sandbox/test_hyperpod_seam.py.

Simulators are keyed by (account, region). A request for a pair without a simulator, and
AddTags / ListTags / DeleteTags on a resource that is not a simulated cluster, go to moto as before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult
from moto.core.utils import camelcase_to_underscores
from moto.sagemaker.responses import SageMakerResponse

from sandbox.hyperpod.operations import HYPERPOD_OPERATIONS, TAG_OPERATIONS
from sandbox.hyperpod.registry import SimulatorRegistry
from sandbox.hyperpod.validation import HyperPodApiError

if TYPE_CHECKING:
    from sandbox.hyperpod.simulator import HyperPodSimulator

_MISSING = object()
_lock = threading.Lock()  # guards _originals
_simulators = SimulatorRegistry("installed")
_originals: dict[str, Any] = {}

Handler = Callable[[SageMakerResponse], Any]


class HyperPodServiceError(ServiceException):
    """An AWS error answer; moto serializes it with the sagemaker model's error shape."""


def simulator_for(account_id: str, region: str) -> HyperPodSimulator | None:
    return _simulators.get(account_id, region)


def register_simulator(simulator: HyperPodSimulator) -> None:
    _simulators.add(simulator)
    install_sagemaker_seam()


def unregister_simulator(simulator: HyperPodSimulator) -> None:
    if _simulators.remove(simulator):
        uninstall_sagemaker_seam()


def seam_installed() -> bool:
    with _lock:
        return bool(_originals)


def install_sagemaker_seam() -> None:
    """Route the HyperPod operations of ``moto.sagemaker.responses.SageMakerResponse`` here."""
    with _lock:
        if _originals:
            return
        for operation in (*HYPERPOD_OPERATIONS, *TAG_OPERATIONS):
            method = camelcase_to_underscores(operation)
            _originals[method] = SageMakerResponse.__dict__.get(method, _MISSING)
            handler = (
                _tag_handler(operation, method)
                if operation in TAG_OPERATIONS
                else _handler(operation, method)
            )
            setattr(SageMakerResponse, method, handler)


def uninstall_sagemaker_seam() -> None:
    """Give moto its own SageMakerResponse methods back."""
    with _lock:
        for method, original in _originals.items():
            if original is _MISSING:
                delattr(SageMakerResponse, method)
            else:
                setattr(SageMakerResponse, method, original)
        _originals.clear()


def _serve(simulator: HyperPodSimulator, operation: str, response: SageMakerResponse) -> Any:
    try:
        return ActionResult(simulator.call(operation, dict(response.params)))
    except HyperPodApiError as error:
        if error.code == "ThrottlingException":
            # Not a sagemaker model shape: answer it directly, as the AWS front door does.
            body = json.dumps({"__type": error.code, "message": error.message})
            return body, {
                "status": 400,
                "x-amzn-errortype": error.code,
                "content-type": "application/x-amz-json-1.1",
            }
        raise HyperPodServiceError(error.code, error.message) from error


def _fallback(response: SageMakerResponse, operation: str, method: str) -> Any:
    original = _originals.get(method, _MISSING)
    if original is _MISSING:
        raise NotImplementedError(
            f"{operation} is served by the HyperPod simulator, and none is installed for "
            f"account {response.current_account} in {response.region}"
        )
    return original(response)


def _handler(operation: str, method: str) -> Handler:
    def serve(self: SageMakerResponse) -> Any:
        simulator = simulator_for(self.current_account, self.region)
        if simulator is None:
            return _fallback(self, operation, method)
        return _serve(simulator, operation, self)

    serve.__name__ = serve.__qualname__ = method
    return serve


def _tag_handler(operation: str, method: str) -> Handler:
    def serve(self: SageMakerResponse) -> Any:
        arn = str(self.params.get("ResourceArn", ""))
        parts = arn.split(":")
        simulator = simulator_for(parts[4], parts[3]) if len(parts) > 5 and ":cluster/" in arn else None
        if simulator is None or not simulator.owns_arn(arn):
            return _fallback(self, operation, method)
        return _serve(simulator, operation, self)

    serve.__name__ = serve.__qualname__ = method
    return serve
