"""HealingSweepFunction: on a schedule, repairs the faulty nodes the event path missed and closes repairs
stuck past their deadline (autopilot.logic.healing.sweep)."""

from __future__ import annotations

from typing import Any

from autopilot import aws
from autopilot.dal.healing import HealingTable
from autopilot.dal.repair_watch import RepairWatch
from autopilot.dal.state_table import StateTable
from autopilot.dal.stuck_nodes import StuckNodes
from autopilot.logic.healing.sweep import HealingSweep
from autopilot.logic.healing.topology import TopologyReader
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics, tracer
from autopilot.settings import healing_settings, healing_sweep_settings
from aws_lambda_powertools.utilities.typing import LambdaContext


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The schedule's time is "now": deadlines count from it (the sandbox's clock in the sandbox).
    scheduled = EventBridgeModel.model_validate(event)
    settings = healing_settings()
    sagemaker = aws.client("sagemaker")
    sweep = HealingSweep(
        store=StateTable(settings.state_table_name),
        healing=HealingTable(settings.state_table_name),
        stuck=StuckNodes(settings.state_table_name),
        watch=RepairWatch(settings.state_table_name),
        topology=TopologyReader(sagemaker=sagemaker),
        sagemaker=sagemaker,
        stepfunctions=aws.client("stepfunctions"),
        events=aws.client("events"),
        sns=aws.client("sns"),
        settings=settings,
        stuck_node_minutes=healing_sweep_settings().stuck_node_minutes,
    )
    outcomes = sweep.run(scheduled.time)
    logger.info("healing sweep done", outcomes=outcomes)
    return outcomes
