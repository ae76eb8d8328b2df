"""Routes of a cluster's automatic repairs: whether they are paused, and pausing or resuming them."""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from autopilot.api import wiring
from autopilot.api.parameters import CLUSTER_NAME, caller
from autopilot.api.responses import responses
from autopilot.models.bodies import (
    HealingBody,
    HealingView,
)

router = Router()  # type: ignore[no-untyped-call]  # (Powertools leaves it untyped)


@router.get(
    "/clusters/<name>/healing",
    summary="Show a cluster's healing state",
    description="Whether automatic repairs are paused (by the breaker or by hand, when and why), the "
    "breaker's window and threshold, and how many repairs hold a slot of MaxConcurrentRepairs.",
    tags=["healing"],
    operation_id="getClusterHealing",
    responses=responses(HTTPStatus.OK, HealingView, "The cluster's healing state.", HTTPStatus.NOT_FOUND),
)
def get_healing(name: CLUSTER_NAME) -> HealingView:
    from autopilot.logic import healing_control  # noqa: PLC0415  (first use)

    return healing_control.get_healing(wiring.deps(), name, caller=caller(router))


@router.put(
    "/clusters/<name>/healing",
    summary="Pause or resume a cluster's automatic repairs",
    description='`{"paused": true}` stops new automatic repairs (events and sweep; repairs already '
    "running finish; an operator's reboot/replace still runs) and records the caller as `pausedBy` and "
    "the optional `reason` as `pausedReason`. "
    '`{"paused": false}` resumes them, clears the breaker\'s window and emits `Healing Resumed`, on '
    "which the healing sweep takes the cluster: nodes left unhealthy meanwhile get their repairs "
    "(MaxConcurrentRepairs at a time) shortly after this answer, which does not wait for them. Setting the "
    "state it already has changes nothing. Allowed to the cluster's creator and the stack's "
    "AdminPrincipalArns (403 otherwise); 409 while the cluster is not ACTIVE.",
    tags=["healing"],
    operation_id="setClusterHealing",
    responses=responses(
        HTTPStatus.OK,
        HealingView,
        "The cluster's healing state after the change.",
        HTTPStatus.FORBIDDEN,
        HTTPStatus.NOT_FOUND,
        HTTPStatus.CONFLICT,
    ),
)
def set_healing(name: CLUSTER_NAME, body: Annotated[HealingBody, Body()]) -> HealingView:
    from autopilot.logic import healing_control  # noqa: PLC0415  (first use)

    return healing_control.set_healing(
        wiring.deps(),
        name,
        paused=body.paused,
        reason=body.reason,
        requested_by=caller(router),
    )
