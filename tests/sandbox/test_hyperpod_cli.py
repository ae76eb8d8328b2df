"""``python -m sandbox up --duplicate-events RATE`` reaches the HyperPod simulators."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.apps import cli


def test_up_passes_the_duplicate_event_rate_to_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def sandbox(*args: Any, **options: Any) -> Any:
        seen.update(options)
        raise Stop

    monkeypatch.setattr(cli, "Sandbox", sandbox)
    with pytest.raises(Stop):
        cli.main(["up", "--duplicate-events", "0.25", "--api-port", "0", "--aws-port", "0"])

    assert seen["duplicate_events"] == 0.25
