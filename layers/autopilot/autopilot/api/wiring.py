"""ApiFunction's wiring: the use cases' dependencies, built once per execution environment.

The routers call ``wiring.get_dependencies()`` through the module, so a test can replace it
(``monkeypatch.setattr(wiring, "get_dependencies", ...)``) or rebuild it (``cache_clear()``).
"""

from __future__ import annotations

from functools import lru_cache

from autopilot.logic.dependencies import Dependencies
from autopilot.settings import api_settings


@lru_cache(maxsize=1)
def get_dependencies() -> Dependencies:
    """The use cases' dependencies, one per execution environment (tests: cache_clear())."""
    return Dependencies(api_settings())
