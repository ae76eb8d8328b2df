"""GET and PUT /clusters/{name}/healing: the cluster's pause switch, its breaker and repair slots.

Pausing by hand records the caller as ``pausedBy``. Resuming clears the breaker's window and emits
``Healing Resumed``, and answers: HealingSweepFunction sweeps the cluster on that event, so the nodes
left Unhealthy while repairs were paused get their repairs (at most MaxConcurrentRepairs at a time: the
workflows' lease caps them, not the start). The sweep of a large backlog takes longer than API Gateway
waits for an answer (29 s), so it is not the request's. Were the event lost, the next scheduled sweep
(HealingSweepScheduleExpression) starts the same repairs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.emitted_events import HealingResumedEventDetail, emit_healing_resumed
from autopilot.errors import NotFoundError
from autopilot.logic.authorize_delete import authorize_delete
from autopilot.logic.read_access import may_read
from autopilot.logic.read_clusters import describe_cluster
from autopilot.logic.repair_node import managed_cluster
from autopilot.models.bodies import BreakerView, HealingView
from autopilot.models.records import ClusterStatus, HealingState, iso, utc_ms
from autopilot.observability import logger

if TYPE_CHECKING:
    from autopilot.logic.dependencies import Dependencies

PAUSED_BY_OPERATOR = "paused through the API"


def get_healing(deps: Dependencies, name: str, *, caller: str | None = None) -> HealingView:
    cluster = deps.store.get_cluster(name)
    if cluster is None or cluster.status is ClusterStatus.DELETED or not may_read(deps, caller, cluster):
        raise NotFoundError(f"cluster {name!r} not found")
    return _view(deps, name)


def set_healing(
    deps: Dependencies,
    name: str,
    *,
    paused: bool,
    requested_by: str | None,
    reason: str | None = None,
) -> HealingView:
    cluster = managed_cluster(deps, name)
    authorize_delete(
        name,
        requested_by,
        cluster.created_by,
        deps.settings.admin_principal_arns,
        action="pause or resume healing of",
        matching=deps.settings.owner_matching,
        owners=cluster.owners,
    )
    by = str(requested_by)  # authorize_delete refuses an unidentified caller
    now = deps.now()
    if paused:
        if deps.healing.pause(name, by=by, reason=reason or PAUSED_BY_OPERATOR, now=now):
            logger.info("healing paused", cluster=name, by=by)
    elif deps.healing.resume(name, by=by, now=now):
        logger.info("healing resumed", cluster=name, by=by)
        # Only the call that flipped the switch announces it: a repeated resume sweeps nothing again.
        detail = HealingResumedEventDetail(cluster_name=name, resumed_by=by, resumed_at=iso(now))
        try:
            emit_healing_resumed(detail, client=deps.events)
        except (ClientError, BotoCoreError, RuntimeError):
            # The resume is written and stands; answering 5xx would only have the caller retry a resume
            # that changes nothing. The scheduled sweep starts the repairs this event would have.
            logger.exception("Healing Resumed not emitted: the scheduled sweep repairs", cluster=name)
    return _view(deps, name)


# HealingView's fields taken from the healing item as they are.
_RECORDED = set(HealingView.model_fields) & set(HealingState.model_fields)
_WHILE_PAUSED = {"paused_reason", "paused_at", "paused_by"}


def _view(deps: Dependencies, name: str) -> HealingView:
    settings = deps.healing_settings
    state = deps.healing.get_healing(name)
    window_start = utc_ms(deps.now() - timedelta(minutes=settings.breaker_window_minutes))
    live = describe_cluster(deps, name)
    node_count = sum(g.CurrentCount or 0 for g in live.InstanceGroups) if live else None
    # The healing item's fields the view shows are the record's own (tests/unit/test_records.py); why and
    # by whom it was paused only while it is.
    recorded = state.model_dump(include=_RECORDED - (set() if state.paused else _WHILE_PAUSED))
    return HealingView.model_validate(
        {
            **recorded,
            "cluster_name": name,
            "breaker": BreakerView(
                unhealthy_in_window=sum(1 for at in state.unhealthy_reports.values() if at >= window_start),
                node_count=node_count,
                max_unhealthy_percent=settings.max_unhealthy_percent,
                window_minutes=settings.breaker_window_minutes,
                tripped_at=state.tripped_at,
            ),
            "active_repairs": len(state.lease_holders),
            "max_concurrent_repairs": settings.max_concurrent_repairs,
        }
    )
