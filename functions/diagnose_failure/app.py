"""DiagnoseFailureFunction: the Create workflow's failure path asks why the create failed → the cause
read from HyperPod's lifecycle logs and cluster events against the catalog
(autopilot.logic.diagnose_failure), returned for the workflow to record and announce."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from autopilot import aws
from autopilot.logic.diagnose_failure import DiagnoseRequest, diagnose_failure
from autopilot.observability import logger, metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class Deps(NamedTuple):
    logs: Any  # no mypy-boto3 stubs for CloudWatch Logs in the layer
    sagemaker: SageMakerClient


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    return Deps(logs=aws.client("logs"), sagemaker=aws.client("sagemaker"))


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    found = deps()
    diagnosis = diagnose_failure(
        DiagnoseRequest.model_validate(event), logs=found.logs, sagemaker=found.sagemaker
    )
    return {"diagnosis": diagnosis.model_dump(mode="json", by_alias=True)}
