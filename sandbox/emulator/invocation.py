"""Which Lambda function's code runs in this context: ``CURRENT_FUNCTION``.

A leaf (nothing of the sandbox imported at run time): the Lambda runtime sets it, and
``sandbox.emulator.aws_calls`` reads it to make a function's AWS calls with its role. Held by the runtime,
it made the interception layer import the runtime, and with it the deployer.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from sandbox.emulator.deploy import FunctionSpec

CURRENT_FUNCTION: Final[ContextVar[FunctionSpec | None]] = ContextVar("current_function", default=None)
"""The function whose code (init or handler) runs in this context: sandbox.emulator.aws_calls makes its AWS
calls with its role."""
