"""ApiFunction: the REST API (API Gateway REST, AWS_IAM auth) over autopilot.api.routes."""

from __future__ import annotations

from typing import Any

from autopilot import aws
from autopilot.api.routes import app
from autopilot.observability import logger, metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

aws.use_config(aws.API_CONFIG)  # AWS calls give up in time for API Gateway's 29 s (autopilot.aws)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
