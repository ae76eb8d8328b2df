"""HealingSweepFunction: on a schedule, repairs the faulty nodes the event path missed and closes repairs
stuck past their deadline (autopilot.logic.healing.sweep), and sends dead-lettered cluster events back
to their queue (autopilot.logic.redrive_events); on a ``Healing Resumed`` event, sweeps that one
cluster, so the nodes left Unhealthy while its repairs were paused get them."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from autopilot import aws
from autopilot.dal.agent import AgentTable
from autopilot.dal.healing import HealingTable
from autopilot.dal.repair_watch import RepairWatch
from autopilot.dal.state_table import StateTable
from autopilot.dal.stuck_nodes import StuckNodes
from autopilot.emitted_events import HEALING_RESUMED, HealingResumedEventDetail
from autopilot.logic.agent.trust import ControllerReader
from autopilot.logic.healing.login_target_drift import repair_login_targets
from autopilot.logic.healing.slurm_signal import SlurmSignal
from autopilot.logic.healing.sweep import HealingSweep
from autopilot.logic.healing.topology import TopologyReader
from autopilot.logic.login_targets import LoginTargets
from autopilot.logic.redrive_events import redrive_dead_letters
from autopilot.models.envelopes import EventBridgeModel
from autopilot.observability import logger, metrics
from autopilot.settings import HealingSweepSettings, healing_settings, healing_sweep_settings
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import BotoCoreError, ClientError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class Deps(NamedTuple):
    sweep: HealingSweep
    login_targets: LoginTargets
    sqs: SQSClient
    settings: HealingSweepSettings


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    settings = healing_settings()
    sweep_settings = healing_sweep_settings()
    sagemaker = aws.client("sagemaker")
    events = aws.client("events")
    store = StateTable(settings.state_table_name)
    return Deps(
        sweep=HealingSweep(
            store=store,
            healing=HealingTable(settings.state_table_name),
            stuck=StuckNodes(settings.state_table_name),
            watch=RepairWatch(settings.state_table_name),
            topology=TopologyReader(sagemaker=sagemaker),
            sagemaker=sagemaker,
            stepfunctions=aws.client("stepfunctions"),
            events=events,
            sns=aws.client("sns"),
            settings=settings,
            stuck_node_minutes=sweep_settings.stuck_node_minutes,
            slurm=SlurmSignal(
                agents=AgentTable(settings.state_table_name),
                operations=store,
                events=events,
                poll_seconds=sweep_settings.agent_poll_seconds,
                not_responding_after=timedelta(minutes=sweep_settings.stuck_node_minutes),
            ),
        ),
        login_targets=LoginTargets(reader=ControllerReader(sagemaker=sagemaker)),
        sqs=aws.client("sqs"),
        settings=sweep_settings,
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # The event's time is "now": deadlines count from it (the sandbox's clock in the sandbox).
    received = EventBridgeModel.model_validate(event)
    found = deps()
    sweep = found.sweep
    if received.detail_type == HEALING_RESUMED:
        resumed = HealingResumedEventDetail.model_validate(received.detail)
        outcomes = dict(sweep.sweep_resumed(resumed.cluster_name, received.time))
        logger.info("resumed cluster swept", cluster=resumed.cluster_name, outcomes=outcomes)
        return outcomes
    outcomes = sweep.run(received.time)
    outcomes.update(repair_login_targets(sweep.store, found.login_targets))
    outcomes[f"redrive_{_redrive(found, received.time)}"] = 1
    logger.info("healing sweep done", outcomes=outcomes)
    return outcomes


def _redrive(found: Deps, now: datetime) -> str:
    """Dead-lettered cluster events back to their queue; a failure does not fail the sweep."""
    try:
        return redrive_dead_letters(
            found.sqs,
            dead_letter_arn=found.settings.cluster_events_dead_letter_queue_arn,
            queue_arn=found.settings.cluster_events_queue_arn,
            now=now,
        )
    except (ClientError, BotoCoreError):
        logger.warning("dead-letter redrive failed; tried again at the next sweep", exc_info=True)
        return "failed"
