"""The API's settings, its event emitter and the OpenAPI generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from autopilot.api import openapi
from autopilot.emitted_events import OperationEventDetail, emit_operation_event
from autopilot.settings import ApiSettings, SettingsError

from tests.samples import API_ENVIRONMENT, ROOT

ENVIRONMENT = API_ENVIRONMENT | {
    # the template's defaults
    "EXECUTION_ROLE_NAME_PATTERNS": "*HyperPod*,*hyperpod*",
    "AUTOPILOT_STACK_NAME": "hyperpod-autopilot",
}


def test_settings_parse_the_environment() -> None:
    settings = ApiSettings.from_environ(ENVIRONMENT)

    assert settings.alerts_topic_arn == "arn:aws:sns:us-east-1:123456789012:alerts"
    assert settings.state_table_name == "state"
    assert settings.idempotency_table_name == "idempotency"
    assert (settings.region, settings.account) == ("us-east-1", "123456789012")


def test_a_missing_or_malformed_setting_fails_loudly_naming_it() -> None:
    broken = {k: v for k, v in ENVIRONMENT.items() if k != "STATE_TABLE_NAME"} | {"ALERTS_TOPIC_ARN": ""}

    with pytest.raises(SettingsError) as raised:
        ApiSettings.from_environ(broken)

    assert "STATE_TABLE_NAME" in str(raised.value)
    assert "ALERTS_TOPIC_ARN" in str(raised.value)


class FakeEvents:
    def __init__(self, failed: int) -> None:
        self.failed = failed
        self.entries: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.entries += Entries
        return {"FailedEntryCount": self.failed, "Entries": [{"ErrorCode": "X"}] if self.failed else [{}]}


def test_operation_events_carry_the_contract_detail() -> None:
    events = FakeEvents(failed=0)
    detail = OperationEventDetail(
        operation_id="op-1",
        operation_type="CreateCluster",
        cluster_name="c",
        status="FAILED",
        error="E",
        cause="C",
    )

    emit_operation_event(detail, client=events)  # type: ignore[arg-type]

    [entry] = events.entries
    assert entry["Source"] == "hyperpod.autopilot"
    assert entry["DetailType"] == "Cluster Operation Failed"
    assert json.loads(entry["Detail"]) == {
        "operationId": "op-1",
        "operationType": "CreateCluster",
        "clusterName": "c",
        "status": "FAILED",
        "error": "E",
        "cause": "C",
    }


def test_a_rejected_event_is_an_error() -> None:
    detail = OperationEventDetail(
        operation_id="o", operation_type="DeleteCluster", cluster_name="c", status="SUCCEEDED"
    )

    with pytest.raises(RuntimeError, match="rejected"):
        emit_operation_event(detail, client=FakeEvents(failed=1))  # type: ignore[arg-type]


def test_the_generator_writes_the_committed_document(tmp_path: Path) -> None:
    target = tmp_path / "openapi.json"

    assert openapi.main([str(target)]) == 0
    assert target.read_text() == (ROOT / "docs" / "openapi.json").read_text()
    assert openapi.main([]) == 2
