"""The diagnosis of a failed create or node launch, from what HyperPod left behind (pure logic).

Inputs are HyperPod's own words: the lifecycle-log streams of the cluster's instances
(``LifecycleConfig/<group>/<instance-id>``), the FailureMessage and the cluster events. The first cause
wins: SageMaker's FailureMessage when it names one, else the earliest line, across every stream and
event, that a catalog entry recognises — so a controller that failed explains the workers that failed
after it instead of 64 symptoms. Nothing recognised is ``unknown`` with the last lines of the stream
that stopped first; no lifecycle log at all is a finding of its own (something kept HyperPod from
writing them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from autopilot.diagnosis.catalog import UNKNOWN, Entry, catalog, first_match
from autopilot.models.records import Diagnosis, DiagnosisConfidence, Evidence

LIFECYCLE_PREFIX = "LifecycleConfig/"
FAILURE_MESSAGE = "FailureMessage"
CLUSTER_EVENT = "ClusterEvent"
UNKNOWN_TAIL_LINES = 20
# A log event may hold 256 KB: evidence lines are cut so a diagnosis stays far below Step Functions'
# 256 KiB payload, EventBridge's 256 KB event and DynamoDB's 400 KB item, whatever the scripts printed.
MAX_LINE_CHARS = 1000
# Other instances quoted beside the first cause ("the same on i-…"), so 64 symptoms stay a footnote.
MORE_EVIDENCE = 3
_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")

NO_LOGS_SUMMARY = (
    "HyperPod wrote no lifecycle log for {what}: the scripts' output never reached CloudWatch Logs."
)
NO_LOGS_FIX = (
    "Let the instances write to CloudWatch Logs: the instance group's ExecutionRole needs "
    "logs:CreateLogStream and logs:PutLogEvents on /aws/sagemaker/Clusters/* (the managed "
    "AmazonSageMakerClusterInstanceRolePolicy has them), and a private subnet needs a CloudWatch Logs "
    "interface endpoint (com.amazonaws.<region>.logs) or a NAT route. A failure before the scripts "
    "start (an instance failing its health checks) also leaves no log: retry the create."
)
UNKNOWN_SUMMARY = (
    "No catalog entry recognises the failure; the last lines of {stream}, the first instance to stop "
    "logging, are attached."
)
UNKNOWN_FIX = (
    "Read the attached lines (and the whole stream in CloudWatch Logs); when the cause recurs, add an "
    "entry to the catalog (layers/autopilot/autopilot/diagnosis/catalog.json)."
)


@dataclass(frozen=True)
class LogLine:
    timestamp: int  # epoch milliseconds, as CloudWatch Logs gives them
    message: str


@dataclass(frozen=True)
class LogStream:
    name: str  # LifecycleConfig/<group>/<instance-id>
    lines: Sequence[LogLine] = field(default_factory=tuple)

    @property
    def instance_id(self) -> str:
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ClusterEvent:
    timestamp: int  # epoch milliseconds
    description: str
    instance_id: str | None = None


def _evidence(stream: str, line: str) -> Evidence:
    cut = line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
    return Evidence(stream=stream, line=cut)


@dataclass(frozen=True)
class _Hit:
    timestamp: int
    order: int  # stream and line position: ties keep the order the streams were read in
    entry: Entry
    evidence: Evidence


def diagnose(
    streams: Sequence[LogStream],
    *,
    failure_message: str = "",
    events: Sequence[ClusterEvent] = (),
    instance_ids: Sequence[str] = (),
    entries: tuple[Entry, ...] | None = None,
) -> Diagnosis:
    """The first cause of the failure (see the module's docstring). ``instance_ids``: the launches that
    failed, when known (a replacement's successor): only their streams and events are read."""
    entries = entries or catalog()
    lifecycle = [s for s in streams if s.name.startswith(LIFECYCLE_PREFIX)]
    if instance_ids:
        lifecycle = [s for s in lifecycle if s.instance_id in instance_ids]
        events = [e for e in events if e.instance_id in instance_ids]
    message = failure_message.strip()
    named = set(_INSTANCE_ID.findall(message)) | set(instance_ids)
    if message and (entry := first_match(message, entries)) is not None:
        return _found(entry, [_evidence(FAILURE_MESSAGE, message)])
    hits = _hits(lifecycle, events, entries)
    if hits:
        first = min(hits, key=lambda hit: (hit.timestamp, hit.order))
        same = [
            hit.evidence
            for hit in sorted(hits, key=lambda hit: (hit.timestamp, hit.order))
            if hit.entry is first.entry and hit.evidence.stream != first.evidence.stream
        ]
        others = {e.stream for e in same}
        diagnosis = _found(first.entry, [first.evidence, *_one_per_stream(same)[:MORE_EVIDENCE]])
        if others:
            diagnosis.summary += f" The same on {len(others)} other instance(s)."
        return diagnosis
    written = [s for s in lifecycle if s.lines]
    failed = [s for s in written if s.instance_id in named] if named else written
    if not failed:
        what = ", ".join(sorted(named)) if named else "any instance of the cluster"
        evidence = [_evidence(FAILURE_MESSAGE, message)] if message else []
        return Diagnosis(
            category=UNKNOWN,
            summary=NO_LOGS_SUMMARY.format(what=what),
            fix=NO_LOGS_FIX,
            evidence=evidence,
            confidence=DiagnosisConfidence.LOW,
        )
    # the stream that stopped first is the instance that failed first
    first_failed = min(failed, key=lambda s: s.lines[-1].timestamp)
    tail = first_failed.lines[-UNKNOWN_TAIL_LINES:]
    return Diagnosis(
        category=UNKNOWN,
        summary=UNKNOWN_SUMMARY.format(stream=first_failed.name),
        fix=UNKNOWN_FIX,
        evidence=[_evidence(first_failed.name, line.message) for line in tail],
        confidence=DiagnosisConfidence.LOW,
    )


def _hits(
    streams: Sequence[LogStream], events: Sequence[ClusterEvent], entries: tuple[Entry, ...]
) -> list[_Hit]:
    """Each stream's first recognised line, and each recognised cluster event."""
    hits: list[_Hit] = []
    order = 0
    for stream in streams:
        for line in stream.lines:
            order += 1
            entry = first_match(line.message, entries)
            if entry is not None:
                hits.append(_Hit(line.timestamp, order, entry, _evidence(stream.name, line.message)))
                break  # what an instance printed after its first error is its consequence
    for event in events:
        order += 1
        entry = first_match(event.description, entries)
        if entry is not None:
            where = f"{CLUSTER_EVENT}/{event.instance_id}" if event.instance_id else CLUSTER_EVENT
            hits.append(_Hit(event.timestamp, order, entry, _evidence(where, event.description)))
    return hits


def _one_per_stream(evidence: list[Evidence]) -> list[Evidence]:
    first: dict[str, Evidence] = {}
    for each in evidence:
        first.setdefault(each.stream, each)
    return list(first.values())


def _found(entry: Entry, evidence: list[Evidence]) -> Diagnosis:
    return Diagnosis(
        category=entry.category,
        summary=entry.summary,
        fix=entry.fix,
        evidence=evidence,
        confidence=DiagnosisConfidence.HIGH,
    )
