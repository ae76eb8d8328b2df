"""LoginTargetsFunction: a workflow asks that a cluster's login target groups hold its login nodes (Create
once InService, ReplaceNode before a replacement succeeds, Cleanup to deregister all) → RegisterTargets /
DeregisterTargets as needed (autopilot.logic.login_targets), what changed returned to the workflow."""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from autopilot.dal.state_table import StateTable
from autopilot.logic.agent.trust import ControllerReader
from autopilot.logic.login_targets import KeepTargetsRequest, LoginTargets, keep_targets
from autopilot.observability import logger, metrics
from autopilot.settings import login_targets_settings
from aws_lambda_powertools.utilities.typing import LambdaContext


class Deps(NamedTuple):
    store: StateTable
    targets: LoginTargets  # each client made on its first call


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    return Deps(
        store=StateTable(login_targets_settings().state_table_name),
        targets=LoginTargets(reader=ControllerReader()),
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    found = deps()
    return keep_targets(KeepTargetsRequest.model_validate(event), store=found.store, targets=found.targets)
