"""The breaker: when too many of a cluster's nodes turn unhealthy at once, automatic repairs pause.

A correlated failure (an Availability Zone, a switch, a bad image) must not become a mass replacement.
Each Unhealthy report is kept in the healing item's ``unhealthyReports`` for ``BreakerWindowMinutes``
(the window ends at the report's own event time, so a late delivery is judged in its own minute); when
more than ``MaxUnhealthyPercent`` of the cluster's nodes are in it — and at least two, since a single
fault is never correlated — repairs pause with pausedBy "breaker". Only the write that flips ``paused``
announces it: one alert on the alerts topic and one ``Healing Paused`` event. Repairs that hold a lease
finish; no new one starts until an operator resumes (PUT /clusters/{name}/healing).
"""

from __future__ import annotations

import json
import random
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from autopilot.dal.healing import BREAKER
from autopilot.emitted_events import HealingPausedEventDetail, emit_healing_paused
from autopilot.models.records import HealingState, iso, utc_ms
from autopilot.observability import Count, count, logger

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sns import SNSClient

    from autopilot.dal.healing import HealingTable
    from autopilot.settings import HealingSettings

# A correlated failure takes at least this many nodes (one fault alone never pauses repairs).
MIN_CORRELATED_NODES = 2
# Versioned writes lost to concurrent reports before the message is given back to the queue.
_ATTEMPTS = 8


class BreakerContentionError(RuntimeError):
    """Other reports kept winning the healing item's version; the message is retried."""


class BreakerOutcome(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    state: HealingState
    # True for the one report whose write paused repairs (it announces the trip).
    tripped: bool
    node_count: int


def breaker_trips(unhealthy: int, node_count: int, max_unhealthy_percent: int) -> bool:
    """More than ``max_unhealthy_percent`` of the nodes, and a correlated number of them."""
    return unhealthy >= MIN_CORRELATED_NODES and unhealthy * 100 > max_unhealthy_percent * node_count


def record_unhealthy(
    table: HealingTable,
    cluster_name: str,
    node_id: str,
    *,
    at: datetime,
    node_count: int,
    settings: HealingSettings,
) -> BreakerOutcome:
    """Keep this Unhealthy report in the breaker's window and trip the breaker if the window is over
    the threshold; the healing item as written (or as read, when the report changed nothing)."""
    reported = utc_ms(at)
    window_start = utc_ms(at - timedelta(minutes=settings.breaker_window_minutes))
    for attempt in range(_ATTEMPTS):
        state = table.get_healing(cluster_name)
        reports = {node: t for node, t in state.unhealthy_reports.items() if t >= window_start}
        reports[node_id] = max(reports.get(node_id, reported), reported)
        # The cluster may have shrunk below the nodes reported in the window: never divide by fewer.
        nodes = max(node_count, len(reports))
        trip = not state.paused and breaker_trips(len(reports), nodes, settings.max_unhealthy_percent)
        if reports == state.unhealthy_reports and not trip:
            return BreakerOutcome(state=state, tripped=False, node_count=nodes)
        reason = (
            f"{len(reports)} of {nodes} nodes reported unhealthy within {settings.breaker_window_minutes} "
            f"minutes (more than {settings.max_unhealthy_percent}%)"
        )
        if table.write_breaker(
            cluster_name,
            reports,
            expected_version=state.version,
            trip_reason=reason if trip else None,
            now=reported,
        ):
            written = state.model_copy(update={"unhealthy_reports": reports, "version": state.version + 1})
            if trip:
                written = written.model_copy(
                    update={
                        "paused": True,
                        "paused_by": BREAKER,
                        "paused_reason": reason,
                        "paused_at": reported,
                        "tripped_at": reported,
                        "trip_alert_pending": True,
                    }
                )
            return BreakerOutcome(state=written, tripped=trip, node_count=nodes)
        # Another report (or a pause / resume) wrote first: read again, after a short jittered pause.
        time.sleep(random.uniform(0, 0.02 * (attempt + 1)))  # noqa: S311 - jitter, not a secret
    raise BreakerContentionError(f"the breaker of {cluster_name} stayed contended over {_ATTEMPTS} attempts")


def announce_trip(
    outcome: BreakerOutcome,
    *,
    table: HealingTable,
    settings: HealingSettings,
    sns: SNSClient,
    events: EventBridgeClient,
) -> None:
    """One alert on the alerts topic and one ``Healing Paused`` event per trip, sent by the report that
    claims it (the trip's own, or a later one when sending failed: the claim is given back and the
    failure raised, so the message is delivered again). Nothing when no alert is pending."""
    state = outcome.state
    if not state.trip_alert_pending or not table.claim_trip_alert(state.cluster_name):
        return
    try:
        _announce(outcome, settings=settings, sns=sns, events=events)
    except Exception:
        table.restore_trip_alert(state.cluster_name)
        raise


def _announce(
    outcome: BreakerOutcome,
    *,
    settings: HealingSettings,
    sns: SNSClient,
    events: EventBridgeClient,
) -> None:
    state = outcome.state
    detail = HealingPausedEventDetail(
        cluster_name=state.cluster_name,
        paused_by=BREAKER,
        reason=state.paused_reason or "",
        paused_at=iso(state.paused_at) if state.paused_at else "",
        unhealthy_nodes=sorted(state.unhealthy_reports),
        node_count=outcome.node_count,
        max_unhealthy_percent=settings.max_unhealthy_percent,
        window_minutes=settings.breaker_window_minutes,
    )
    logger.warning("healing paused by the breaker", cluster=state.cluster_name, reason=detail.reason)
    count(Count.BREAKERS_TRIPPED)
    sns.publish(
        TopicArn=settings.alerts_topic_arn,
        # SNS subjects are at most 100 characters; a cluster name is at most 63.
        Subject=f"Autopilot paused healing on {state.cluster_name}"[:100],
        Message=json.dumps(
            {
                "alert": "Healing Paused",
                **detail.model_dump(by_alias=True),
                "resume": f'PUT /clusters/{state.cluster_name}/healing {{"paused": false}}',
            },
            indent=2,
        ),
        # what subscribers filter on (FilterPolicy), as the other alerts of the topic carry it
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "HealingPaused"}},
    )
    emit_healing_paused(detail, client=events)
