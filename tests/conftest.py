"""Process-wide test setup, before any module of the product is imported.

Powertools reads POWERTOOLS_METRICS_NAMESPACE when ``autopilot.observability`` creates its Metrics,
once per process: whichever test imported it first decided the namespace for every later test in that
worker (a handler's ``@metrics.log_metrics`` raises without one). The functions get it from the
template's Globals; the tests get the same value here, whatever runs first.
"""

from __future__ import annotations

import functools
import os

import botocore.loaders
import botocore.session
import pytest

os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "HyperPodAutopilot")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "hyperpod-autopilot")


@functools.cache
def _shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
    """One botocore data loader for every session the tests make, as sandbox.apps.simulate's driver does:
    each new session (a test's client, ``autopilot.aws``'s client in each in-process function
    environment, moto's clients) otherwise reads and parses the service's JSON model again, ~0.4 s a
    client, the largest share of an in-process invocation. Loaded models are only read; sharing them
    changes what the machine does, not what the code under test does."""
    return botocore.loaders.create_loader(search_path_string)


botocore.session.create_loader = _shared_loader


# Real Slurm (``make slurm``; the fixture ``slurm_required`` of tests/sandbox/conftest.py). Where it is
# missing, the tests that need it are left out with ONE line at the end of the run saying how to install
# it (not one line per test); under CI (env CI set) they run and fail: CI never skips them.
def _slurm_missing() -> str | None:
    from sandbox.services.slurm import INSTALL_HINT, missing_slurm  # noqa: PLC0415 - only this check needs it

    missing = missing_slurm()
    return f"real Slurm is not installed ({', '.join(missing)} missing): {INSTALL_HINT}" if missing else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CI") or _slurm_missing() is None:
        return
    needs_slurm = [item for item in items if "slurm_required" in getattr(item, "fixturenames", ())]
    if needs_slurm:
        items[:] = [item for item in items if item not in needs_slurm]
        config.hook.pytest_deselected(items=needs_slurm)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    message = None if os.environ.get("CI") else _slurm_missing()
    if message is not None:
        terminalreporter.write_line(f"SKIPPED every real-Slurm test: {message}", yellow=True, bold=True)
