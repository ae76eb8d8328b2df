"""autopilot.emitted_events.put_event: the one PutEvents call every Autopilot event goes through."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.emitted_events import (
    SESSION_TERMINATED,
    SOURCE,
    SessionTerminatedEventDetail,
    emit_session_terminated,
    put_event,
)


class Bus:
    """PutEvents answering as EventBridge does: 200, with the refused entries counted in the body."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.entries += Entries
        if self.refuse:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "e1"}]}


def test_an_event_goes_to_the_default_bus_with_its_resources() -> None:
    bus = Bus()

    put_event(bus, "Cost Tags Repaired", '{"clusterName": "c"}', resources=["arn:aws:s3:::b"])  # type: ignore[arg-type]

    assert bus.entries == [
        {
            "Source": SOURCE,
            "DetailType": "Cost Tags Repaired",
            "Detail": '{"clusterName": "c"}',
            "Resources": ["arn:aws:s3:::b"],
            "EventBusName": "default",
        }
    ]


def test_an_event_eventbridge_refuses_is_an_error_naming_it() -> None:
    detail = SessionTerminatedEventDetail(
        cluster_name="c",
        session_id="s-1",
        target="sagemaker-cluster:abc_g-i",
        principal="p",
        reason="over-limit",
        trigger="event",
        limit=2,
    )

    with pytest.raises(RuntimeError, match=f"rejected the {SESSION_TERMINATED} event.*InternalFailure"):
        emit_session_terminated(detail, client=Bus(refuse=True))  # type: ignore[arg-type]
