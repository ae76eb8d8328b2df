"""AgentFunction: the Slurm agent's reports (API Gateway, ``POST /agent/{name}/reports``, AWS_IAM) and
ReplaceNodeStateMachine's direct invokes — ``{"command": {...}}`` (waitForTaskToken) and ``{"status":
{...}}`` — over autopilot.logic.agent (docs/agent.md)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from functools import cache, partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from autopilot import aws, clock
from autopilot.api.unavailable import RETRY_AFTER_SECONDS, aws_unavailable
from autopilot.dal.agent import AgentTable
from autopilot.dal.state_table import StateTable
from autopilot.errors import ConflictError, NotFoundError
from autopilot.logic.agent.commands import enqueue_command
from autopilot.logic.agent.reports import AgentDeps, InvalidReportError, handle_report
from autopilot.logic.agent.status import workflow_status
from autopilot.logic.agent.trust import ControllerReader, UntrustedReportError
from autopilot.models.agent import CommandRequest, StatusRequest
from autopilot.observability import logger, metrics
from autopilot.settings import agent_settings
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from autopilot.logic.usage_ingest import UsageDeps
    from autopilot.settings.agent import AgentSettings

_REFUSALS: tuple[tuple[type[Exception], HTTPStatus], ...] = (
    (UntrustedReportError, HTTPStatus.FORBIDDEN),
    (NotFoundError, HTTPStatus.NOT_FOUND),
    (ConflictError, HTTPStatus.CONFLICT),
    (InvalidReportError, HTTPStatus.BAD_REQUEST),
)


def _cluster_tags(store: StateTable) -> Callable[[str], tuple[str | None, str | None]]:
    def tags(name: str) -> tuple[str | None, str | None]:
        cluster = store.get_cluster(name)
        return (cluster.owner, cluster.project) if cluster else (None, None)

    return tags


def _usage(settings: AgentSettings) -> UsageDeps:
    """Chargeback's intake, built on the first report with jobs (deps() holds it cached): its modules
    (usage, prices, budget alerts) are imported then, not at init (commands and status answers never
    use them)."""
    from autopilot.dal.spend import SpendTable  # noqa: PLC0415  (first report with jobs)
    from autopilot.dal.usage import UsageTable  # noqa: PLC0415  (first report with jobs)
    from autopilot.logic.usage_ingest import (  # noqa: PLC0415  (first report with jobs)
        UsageDeps,
        listed_node_types,
        registry_created_at,
    )
    from autopilot.pricing import ListPrices  # noqa: PLC0415  (first report with jobs)

    return UsageDeps(
        usage=UsageTable(settings.state_table_name),
        prices=ListPrices(settings.region, SpendTable(settings.state_table_name)),
        node_types=listed_node_types(lambda: aws.client("sagemaker")),
        sns=lambda: aws.client("sns"),
        alerts_topic_arn=settings.alerts_topic_arn,
        cluster_tags=_cluster_tags(StateTable(settings.state_table_name)),
        created_at=registry_created_at(StateTable(settings.state_table_name).get_cluster),
    )


@cache
def deps() -> AgentDeps:
    """Built on the first invocation, once per execution environment; each client on its first call."""
    settings = agent_settings()
    return AgentDeps(
        agents=AgentTable(settings.state_table_name),
        controllers=ControllerReader(),
        stepfunctions=aws.client("stepfunctions"),
        poll_seconds=settings.poll_seconds,
        # arn:aws:sns:<region>:<account>:<name>: the stack's account (its own topic's), without an STS call
        account=settings.alerts_topic_arn.split(":")[4],
        now=lambda: clock.now(),  # noqa: PLW0108  (read at each call: the sandbox sets it)
        usage=cache(partial(_usage, settings)),
    )


def _answer(status: HTTPStatus, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": int(status),
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body),
    }


def _json_body(event: dict[str, Any]) -> Any:
    raw = event.get("body") or ""
    try:
        return json.loads(base64.b64decode(raw) if event.get("isBase64Encoded") else raw)
    except ValueError:
        return None  # answered 400 once the caller is trusted


def report(event: dict[str, Any], deps: AgentDeps) -> dict[str, Any]:
    name = str((event.get("pathParameters") or {}).get("name", ""))
    user_arn = ((event.get("requestContext") or {}).get("identity") or {}).get("userArn")
    try:
        return _answer(HTTPStatus.OK, handle_report(deps, name, user_arn, _json_body(event)))
    except tuple(e for e, _ in _REFUSALS) as exc:
        status = next(s for e, s in _REFUSALS if isinstance(exc, e))
        if status is HTTPStatus.FORBIDDEN:  # the log holds why; the caller learns only that it may not
            return _answer(status, {"message": f"not allowed to report for cluster {name!r}"})
        return _answer(status, {"message": str(exc)})
    except Exception as exc:
        # AWS busy or unreachable after boto3's retries (throttling, a 5xx, DynamoDB leaving keys
        # unread): the agent sends the same report again later, as the 503 and Retry-After say;
        # anything else is a defect, a 502 from API Gateway with the traceback in the log.
        # chargeback's error: its module is loaded by then if the report had jobs
        from autopilot.dal.usage import UnprocessedKeysError  # noqa: PLC0415

        if not (aws_unavailable(exc) or isinstance(exc, UnprocessedKeysError)):
            raise
        logger.warning("agent report failed: AWS unavailable", cluster=name, error=repr(exc))
        answer = _answer(HTTPStatus.SERVICE_UNAVAILABLE, {"message": "AWS is busy: send the report again"})
        answer["headers"]["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return answer


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    found = deps()
    if "command" in event:
        return enqueue_command(found.agents, CommandRequest.model_validate(event["command"]), now=found.now())
    if "status" in event:
        request = StatusRequest.model_validate(event["status"])
        return workflow_status(
            found.agents,
            found.controllers,
            request.cluster_name,
            now=found.now(),
            poll_seconds=found.poll_seconds,
            node=request.node,
        )
    return report(event, found)
