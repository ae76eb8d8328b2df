"""ClusterEventsFunction: the cluster-events queue (HyperPod's events and the workflows' wait
requests) → autopilot.logic.cluster_events, one message at a time, partial batch failures."""

from __future__ import annotations  # noqa: I001 - the batch import goes first (below)

# Before anything imports pydantic: Powertools' batch types build its parser's event models (a hundred
# pydantic classes, 0.3-0.9 s of cold start) only when pydantic is imported already.
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

import json
from functools import cache
from typing import Any

from autopilot.logic.cluster_events import Origin, handle_message
from autopilot.logic.healing.node_health import NodeHealing
from autopilot.logic.launch_watch import LaunchWatch
from autopilot.observability import Count, count, logger, metrics
from autopilot.settings import cluster_events_settings, healing_settings
from autopilot.workflows.cluster_waits import ClusterWaits
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

processor = BatchProcessor(event_type=EventType.SQS)


@cache
def waits() -> ClusterWaits:
    return ClusterWaits(cluster_events_settings().state_table_name)


@cache
def healing() -> NodeHealing:
    return NodeHealing(healing_settings())


@cache
def launches() -> LaunchWatch:
    return LaunchWatch.of(cluster_events_settings().state_table_name)


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> None:
    body: dict[str, Any] = json.loads(record.body)
    origin = Origin.of_function(lambda_context.invoked_function_arn)
    kind = handle_message(
        body, int(record.attributes.sent_timestamp), waits(), healing(), origin=origin, launches=launches()
    )
    logger.debug("message processed", kind=kind, message_id=record.message_id)
    count(Count.CLUSTER_EVENTS_HANDLED)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
