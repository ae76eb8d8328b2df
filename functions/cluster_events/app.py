"""ClusterEventsFunction: the cluster-events queue (HyperPod's events and the workflows' wait
requests) → autopilot.logic.cluster_events, one message at a time, partial batch failures."""

from __future__ import annotations

import json
from functools import cache
from typing import Any, NamedTuple

from autopilot.logic.cluster_events import Origin, handle_message
from autopilot.logic.healing.node_health import NodeHealing
from autopilot.logic.launch_watch import LaunchWatch
from autopilot.observability import Count, count, logger, metrics
from autopilot.settings import cluster_events_settings, healing_settings
from autopilot.workflows.cluster_waits import ClusterWaits
from aws_lambda_powertools.utilities.typing import LambdaContext


class Deps(NamedTuple):
    waits: ClusterWaits
    healing: NodeHealing
    launches: LaunchWatch


@cache
def deps() -> Deps:
    """Built on the first message, once per execution environment; each client on its first call."""
    table = cluster_events_settings().state_table_name
    return Deps(
        waits=ClusterWaits(table), healing=NodeHealing(healing_settings()), launches=LaunchWatch.of(table)
    )


def handle_record(record: dict[str, Any], origin: Origin) -> None:
    body: dict[str, Any] = json.loads(record["body"])
    found = deps()
    kind = handle_message(
        body,
        int(record["attributes"]["SentTimestamp"]),
        found.waits,
        found.healing,
        origin=origin,
        launches=found.launches,
    )
    logger.debug("message processed", kind=kind, message_id=record["messageId"])
    count(Count.CLUSTER_EVENTS_HANDLED)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, list[dict[str, str]]]:
    # SQS's partial batch response (the event source mapping's ReportBatchItemFailures): the failed
    # messages come back after their visibility timeout, the others are deleted. Written here rather
    # than with Powertools' batch utility, whose import (asyncio, every event data class) was ~0.14x of
    # the baseline's cold start for this loop. Every message failing is answered the same way: all of
    # them come back, as they would after a raised error.
    origin = Origin.of_function(context.invoked_function_arn)
    failures = []
    for record in event["Records"]:
        try:
            handle_record(record, origin)
        except Exception:  # noqa: BLE001  (any failure: the message is retried, then dead-lettered)
            logger.exception("message failed: SQS delivers it again", message_id=record["messageId"])
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}
