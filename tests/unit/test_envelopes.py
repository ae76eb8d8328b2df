"""autopilot.models.envelopes: the EventBridge and SNS envelopes read as Powertools' parser reads them
(the functions avoid importing the parser: it builds every event model it ships)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from autopilot.models import envelopes
from aws_lambda_powertools.utilities.parser import models as powertools
from pydantic import BaseModel

from tests.samples import ROOT, load_event


def _fields(model: type[BaseModel]) -> dict[str, tuple[str | None, bool]]:
    return {name: (f.alias, f.is_required()) for name, f in model.model_fields.items()}


def test_the_eventbridge_envelope_is_powertools_own() -> None:
    assert _fields(envelopes.EventBridgeModel) == _fields(powertools.EventBridgeModel)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (envelopes.SnsModel, powertools.SnsModel),
        (envelopes.SnsRecordModel, powertools.SnsRecordModel),
        (envelopes.SnsNotificationModel, powertools.SnsNotificationModel),
    ],
)
def test_the_sns_envelope_reads_powertools_fields(ours: type[BaseModel], theirs: type[BaseModel]) -> None:
    assert _fields(ours).items() <= _fields(theirs).items()


@pytest.mark.parametrize(
    "name",
    ["schedule/scheduled_event.json", "ssm/start_session.json", "stepfunctions/execution_failed.json"],
)
def test_sample_eventbridge_events_read_alike(name: str) -> None:
    event = load_event(name)

    ours = envelopes.EventBridgeModel.model_validate(event)

    assert ours.model_dump() == powertools.EventBridgeModel.model_validate(event).model_dump()


def test_a_budgets_notification_reads_alike() -> None:
    event = load_event("budgets/sns_notification.json")

    ours = envelopes.SnsModel.model_validate(event).Records[0].Sns
    theirs = powertools.SnsModel.model_validate(event).Records[0].Sns

    assert (ours.Message, ours.Subject, ours.TopicArn) == (theirs.Message, theirs.Subject, theirs.TopicArn)


def _imports_the_parser(function: str) -> bool:
    """Whether importing functions/<function>/app.py (as Lambda does) imports Powertools' parser models."""
    probe = "import sys, app; print('aws_lambda_powertools.utilities.parser.models' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={
            "PYTHONPATH": f"{ROOT / 'functions' / function}:{ROOT / 'layers' / 'autopilot'}",
            "AWS_REGION": "us-east-1",
            "POWERTOOLS_TRACE_DISABLED": "true",
        },
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return result.stdout.strip() == "True"


@pytest.mark.parametrize(
    "function",
    [
        "reconciler",
        "record_outcome",
        "session_guard",
        "spend_meter",
        "budget_alerts",
        "cost_tagger",
        "healing_sweep",
    ],
)
def test_a_function_that_reads_envelopes_does_not_import_the_parser(function: str) -> None:
    assert not _imports_the_parser(function)


def test_cluster_events_imports_the_batch_processor_without_the_parsers_models() -> None:
    # Powertools' batch types import the parser's models when pydantic is already imported
    assert not _imports_the_parser("cluster_events")
