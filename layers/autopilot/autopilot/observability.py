"""The one place where logger, tracer and metrics are created; everything else imports them."""

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
