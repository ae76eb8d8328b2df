"""SessionGuardFunction: CloudTrail's StartSession record (EventBridge), its AssumeRole* records that
carry an SSMSessionRunAs session tag, and the schedule → autopilot.logic.session_guard (SSM session
limits and Run-As checks on registered HyperPod clusters)."""

from __future__ import annotations

from functools import cache
from typing import Any

from autopilot.logic.session_guard import TERMINATED, SessionGuard
from autopilot.models.sessions import AssumeRoleEvent, StartSessionEvent
from autopilot.observability import Count, count, logger, metrics
from autopilot.settings import session_guard_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

SCHEDULED = "Scheduled Event"
STS = "sts.amazonaws.com"


@cache
def deps() -> SessionGuard:
    """Built on the first invocation, once per execution environment; each client on its first call."""
    return SessionGuard(session_guard_settings())


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    guard = deps()
    if event.get("detail-type") == SCHEDULED:
        outcomes = guard.sweep()
    elif (event.get("detail") or {}).get("eventSource") == STS:
        outcomes = guard.on_assume_role(AssumeRoleEvent.model_validate(event).detail)
    else:
        outcomes = guard.on_start_session(StartSessionEvent.model_validate(event).detail)
    logger.info("sessions checked", trigger=event.get("detail-type"), outcomes=outcomes)
    count(Count.SESSIONS_TERMINATED, outcomes.get(TERMINATED, 0))
    return outcomes
