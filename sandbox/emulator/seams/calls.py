"""AWS calls: answered by sandbox.emulator.aws_calls before moto (IAM, faults), and counted (a botocore
extension point, not a patch).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Final

import boto3
import botocore.handlers
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.models import botocore_stubber

from sandbox.emulator.aws_calls import interception
from sandbox.emulator.patching import SeamDrift, expect_signature
from sandbox.emulator.seams.base import replace, state


# --------------------------------------------------------------------------------------------------
# seam: AWS calls answered by sandbox.emulator.aws_calls before moto (IAM, faults)
# --------------------------------------------------------------------------------------------------
def intercept_aws_calls() -> None:
    seam = "intercept_aws_calls"
    if ("before-send", botocore_stubber) not in botocore.handlers.BUILTIN_HANDLERS:
        raise SeamDrift(f"{seam}: moto's BotocoreStubber is no longer a before-send handler")
    original = expect_signature(BotocoreStubber, "__call__", ["self", "event_name", "request"], seam)

    def stub(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
        if self.enabled:
            answered = interception.answer(
                request, carry_out=lambda: original(self, event_name, request, **kwargs)
            )
            if answered is not None:
                return answered
        return original(self, event_name, request, **kwargs)

    replace(BotocoreStubber, "__call__", stub)
    interception.activate()
    state.undo.append(interception.deactivate)


# --------------------------------------------------------------------------------------------------
# AWS call recording (botocore extension point, not a patch)
# --------------------------------------------------------------------------------------------------
_calls: Final[Counter[str]] = Counter()
_calls_lock: Final = threading.Lock()
_recording: Final = threading.Event()


def _count_call(model: Any = None, **_: Any) -> None:
    if _recording.is_set() and model is not None:
        key = f"{model.service_model.service_name}:{model.name}"
        with _calls_lock:
            _calls[key] += 1


def record_aws_calls() -> None:
    """Count every in-process botocore call (clients created after this too) per service:Operation,
    from zero: an earlier sandbox's counts in this process are not this one's (its deploy read them)."""
    reset_aws_calls()
    handler = ("before-call", _count_call)
    if handler not in botocore.handlers.BUILTIN_HANDLERS:
        botocore.handlers.BUILTIN_HANDLERS.append(handler)
    if boto3.DEFAULT_SESSION is not None:
        boto3.DEFAULT_SESSION._session.unregister("before-call", _count_call)
        boto3.DEFAULT_SESSION._session.register("before-call", _count_call)
    _recording.set()
    state.undo.append(_recording.clear)


def aws_calls() -> dict[str, int]:
    with _calls_lock:
        return dict(sorted(_calls.items()))


def reset_aws_calls() -> None:
    with _calls_lock:
        _calls.clear()


def deliveries() -> dict[str, int]:
    return dict(sorted(state.deliveries.items()))
