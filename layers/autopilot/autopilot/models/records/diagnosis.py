"""A failed create's or node launch's diagnosis (DiagnoseFailureFunction), as its operation holds it."""

from __future__ import annotations

from pydantic import Field

from autopilot.models.records.base import DiagnosisConfidence, RecordModel


class Evidence(RecordModel):
    """One line a diagnosis rests on: a lifecycle-log line with its stream, or ``FailureMessage`` /
    ``ClusterEvent`` for SageMaker's own words."""

    stream: str
    line: str


class Diagnosis(RecordModel):
    """Why a create or a node launch failed, read from HyperPod's lifecycle logs against the catalog
    (autopilot/diagnosis/catalog.json; docs/operations.md, "Failure diagnosis")."""

    category: str
    summary: str
    fix: str
    evidence: list[Evidence] = Field(default_factory=list)
    confidence: DiagnosisConfidence
