"""ApiFunction's wiring: the use cases' dependencies, built once per execution environment.

Every function wires its dependencies the same way, a typed, cached ``deps()`` (the others in their
handler module, functions/*/app.py; ApiFunction's here, where its routers reach it). The routers call
``wiring.deps()`` through the module, so a test replaces it (``monkeypatch.setattr(wiring, "deps",
lambda: fake)``) or rebuilds it (``deps.cache_clear()``), as it does any function's ``deps``.
"""

from __future__ import annotations

from functools import cache

from autopilot.logic.dependencies import Dependencies
from autopilot.settings import api_settings


@cache
def deps() -> Dependencies:
    """The use cases' dependencies, made on the first request (each client on its first call)."""
    return Dependencies(api_settings())
