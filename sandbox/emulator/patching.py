"""The toolkit a seam is written with: ``SeamDrift``, ``expect_signature`` and ``Patches``.

A leaf (it imports nothing of the sandbox): the seam modules (``stepfunctions_*``, ``elbv2_targets``,
``pricing``, ``sqs``, ``deploy.moto_iam``) import it, and ``sandbox.emulator.seams``, the registry that
installs them, imports them. With the toolkit in the registry, every seam module imported its own importer
back (a 17-file import circle through the Lambda runtime and the deployer).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class SeamDrift(RuntimeError):
    """moto no longer has the shape a seam was written against: re-check the seam after an upgrade."""


def expect_signature(
    owner: type, name: str, parameters: list[str], seam: str, *, exact: bool = False
) -> Callable[..., Any]:
    """The moto function a seam replaces, after checking it still takes the parameters the seam passes
    (first, or ``exact``ly these when the replacement has the original's signature)."""
    target = owner.__dict__.get(name)
    if not callable(target):
        raise SeamDrift(f"{seam}: {owner.__module__}.{owner.__name__}.{name} is gone")
    actual = list(inspect.signature(target).parameters)
    if (actual if exact else actual[: len(parameters)]) != parameters:
        raise SeamDrift(f"{seam}: {owner.__name__}.{name} has parameters {actual}, expected {parameters}")
    return target  # type: ignore[no-any-return]


class Patches:
    """Attributes a seam module replaces on moto, put back in reverse order by ``undo``."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def replace(self, owner: Any, name: str, value: Any) -> None:
        original = vars(owner)[name]
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()
