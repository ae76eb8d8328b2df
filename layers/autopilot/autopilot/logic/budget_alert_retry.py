"""BudgetAlertsFunction's schedule (every RETRY_MINUTES): what a failure left undone, finished.

An alert SNS did not take is published as it was built; a notification whose claim lapsed before its
alert was built is handled again; a scale-down SageMaker refused is tried again until it is done or
ENFORCEMENT_RETRY_FOR has passed, and its end announced (logic/budget_alerts.py handles the
notifications themselves and says why nothing goes to the dead-letter queue).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError

from autopilot.dal.budget_alerts import AlertKey, ClaimResult, UnfinishedAlert
from autopilot.logic.budget_alerts import (
    CLAIM_LEASE_SECONDS,
    KEEP_AFTER_PERIOD,
    LOOKBACK,
    SNS_SUBJECT_MAX,
    AlertInFlightError,
    BudgetAlertDeps,
    Handled,
    finish_operation,
    handle_notification,
    publish_or_keep,
    scale_to_min,
)
from autopilot.models.records import ClusterStatus, Operation, OperationError, OperationStatus, OperationType
from autopilot.observability import logger


def retry_unfinished(deps: BudgetAlertDeps) -> dict[str, int]:
    """Finish every unpublished alert whose claim has lapsed, and retry every pending scale-down."""
    now = deps.now()
    outcomes: dict[str, int] = {}

    def tally(what: str) -> None:
        outcomes[what] = outcomes.get(what, 0) + 1

    for operation in deps.store.list_running_operations(created_after=now - LOOKBACK):
        if operation.operation_type is OperationType.SCALE_TO_MIN:
            tally(f"scale-to-min {_retryscale_to_min(deps, operation, now)}")
    for unfinished in deps.alerts.unfinished(claimed_before=now - timedelta(seconds=CLAIM_LEASE_SECONDS)):
        try:
            tally(f"alert {_finish_alert(deps, unfinished, now)}")
        except (ClientError, BotoCoreError, AlertInFlightError):
            logger.warning("unfinished alert still failing", alert=str(unfinished.key), exc_info=True)
            tally("alert still failing")
    if outcomes:
        logger.info("budget work retried", outcomes=outcomes)
    return outcomes


def _finish_alert(deps: BudgetAlertDeps, unfinished: UnfinishedAlert, now: datetime) -> str:
    key = unfinished.key
    if unfinished.alert_body is not None:  # built, but SNS refused it: publish it as it was
        body = json.loads(unfinished.alert_body)
        subject = unfinished.alert_subject or "HyperPod budget alert"
        return "published" if publish_or_keep(deps, key, subject=subject, body=body) else "kept"
    if unfinished.message is None:  # nothing to redo it from
        deps.alerts.close(key, at=now, reason="no notification kept")
        return "closed"
    handled = handle_notification(unfinished.message, unfinished.subject, deps)
    if handled in (Handled.UNCONFIRMED, Handled.FORWARDED):
        deps.alerts.close(key, at=now, reason=f"redone: {handled.value}")
    return handled.value


def _retryscale_to_min(deps: BudgetAlertDeps, operation: Operation, now: datetime) -> str:
    """One more attempt at a pending scale-down; its end (done or failed) is announced."""
    budget_name = (operation.requested_by or "").removeprefix("budget:")
    cluster = deps.store.get_cluster(operation.cluster_name)
    if cluster is None or cluster.status is not ClusterStatus.ACTIVE:
        error = OperationError(
            error="ClusterNotActive",
            cause=f"the cluster is {cluster.status.value if cluster else 'gone'}, not ACTIVE",
        )
        finish_operation(deps, operation, OperationStatus.FAILED, [], error)
        return "failed"
    outcome = scale_to_min(deps, cluster, budget_name, operation.operation_id, now)
    if outcome.result == "pending":
        return "pending"
    key = AlertKey(
        budget_name=budget_name,
        period=f"{now:%Y-%m}",
        alert_type="ENFORCEMENT",
        threshold=operation.operation_id,
    )
    claim = deps.alerts.claim(
        key,
        now=now,
        lease_seconds=CLAIM_LEASE_SECONDS,
        operation_id=operation.operation_id,
        expires_at=int((now + KEEP_AFTER_PERIOD).timestamp()),
    )
    if claim.result is ClaimResult.CLAIMED:
        body = {
            "kind": "BudgetEnforcementFinished",
            "summary": f"cluster {cluster.cluster_name}: scale-to-min {outcome.result} after retrying: "
            f"{outcome.message}",
            "budgetName": budget_name,
            "clusterName": cluster.cluster_name,
            "owner": cluster.owner,
            "project": cluster.project,
            "enforcement": outcome.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        subject = f"HyperPod budget: {cluster.cluster_name} scale-to-min {outcome.result}"
        publish_or_keep(deps, key, subject=subject[:SNS_SUBJECT_MAX], body=body)
    return outcome.result
