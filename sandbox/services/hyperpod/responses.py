"""The moto seam: SageMaker's HyperPod operations are answered by the registered simulators.

moto dispatches a SageMaker request (in-process through ``mock_aws``'s botocore stubber, or over
HTTP through ``ThreadedMotoServer``) to ``SageMakerResponse.dispatch``, which calls the method named
after the action (``create_cluster``...) on a fresh ``SageMakerResponse`` whose ``params`` hold the
request parsed with botocore's model. ``install_sagemaker_seam`` sets one such method per HyperPod
operation on that class; uninstalling restores moto's own (or removes what moto lacks). The seam's
assumptions about moto are pinned by tests/sandbox/test_hyperpod_seam.py.

Simulators are keyed by (account, region) (registry.py): while the seam is installed, every pair
has one, spawned on its first request, so moto never answers a HyperPod operation. AddTags /
ListTags / DeleteTags go to the simulator of the ARN's (account, region) when the ARN names a
cluster (a missing one gets SageMaker's 4xx, not moto's); every other resource's tags stay with moto.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult
from moto.core.utils import camelcase_to_underscores
from moto.sagemaker.responses import SageMakerResponse

from sandbox.services.hyperpod.operations import HYPERPOD_OPERATIONS, TAG_OPERATIONS
from sandbox.services.hyperpod.registry import SIMULATORS
from sandbox.services.hyperpod.validation import HyperPodApiError

if TYPE_CHECKING:
    from sandbox.services.hyperpod.simulator import HyperPodSimulator

_MISSING = object()
_lock = threading.Lock()  # guards _originals
_originals: dict[str, Any] = {}
# A HyperPod cluster's ARN, as botocore's ClusterArn pattern spells it: (region, account).
_CLUSTER_ARN = re.compile(r"arn:aws[a-z\-]*:sagemaker:([a-z0-9\-]*):([0-9]{12}):cluster/.*")

Handler = Callable[[SageMakerResponse], Any]


class HyperPodServiceError(ServiceException):
    """An AWS error answer; moto serializes it with the sagemaker model's error shape."""


def simulator_for(account_id: str, region: str) -> HyperPodSimulator | None:
    """The simulator serving (account, region), spawned on first use; None while none is installed."""
    return SIMULATORS.get(account_id, region)


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
        raise HyperPodServiceError(error.code, error.message) from error


def _fallback(response: SageMakerResponse, operation: str, method: str) -> Any:
    original = _originals.get(method, _MISSING)
    if original is _MISSING:
        raise NotImplementedError(f"{operation} is served by the HyperPod simulator, and none is installed")
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
        cluster = _CLUSTER_ARN.fullmatch(str(self.params.get("ResourceArn", "")))
        simulator = simulator_for(cluster.group(2), cluster.group(1)) if cluster else None
        if simulator is None:
            return _fallback(self, operation, method)
        return _serve(simulator, operation, self)

    serve.__name__ = serve.__qualname__ = method
    return serve
