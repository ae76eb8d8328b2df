"""UsageExportFunction: every day, each registered cluster's chargeback of the month to date (and of
the month before, once it closed) as CSV in the stack's UsageExportBucket, under UsageExportPrefix, in
the layout Athena reads (autopilot.logic.usage_export). Off (nothing read, nothing written) while
UsageExportBucket is empty."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from autopilot.aws import LazyClient
from autopilot.dal.spend import SpendTable
from autopilot.dal.state_store import every_cluster
from autopilot.dal.state_table import StateTable
from autopilot.dal.usage import UsageTable
from autopilot.logic.usage_export import ExportedCluster, export_usage
from autopilot.models.envelopes import EventBridgeModel
from autopilot.models.records import ClusterStatus
from autopilot.observability import logger, metrics
from autopilot.settings import UsageExportSettings, usage_export_settings
from aws_lambda_powertools.utilities.typing import LambdaContext

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class Deps:
    s3: LazyClient[S3Client] = LazyClient("s3")  # made on its first call (none while the export is off)

    def __init__(self, settings: UsageExportSettings, *, s3: S3Client | None = None) -> None:
        self.settings = settings
        self.store = StateTable(settings.state_table_name)
        self.usage = UsageTable(settings.state_table_name)
        self.spend = SpendTable(settings.state_table_name)
        self._s3 = s3


@cache
def deps() -> Deps:
    """Built on the first invocation, once per execution environment."""
    return Deps(usage_export_settings())


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    found = deps()
    settings = found.settings
    if not settings.bucket:
        logger.info("usage export is off (UsageExportBucket is empty)")
        return {}
    scheduled = EventBridgeModel.model_validate(event)

    # arn:aws:lambda:<region>:<account>:function:<name>: the stack's account, without an STS call
    account = context.invoked_function_arn.split(":")[4]

    def put_object(key: str, body: str) -> None:
        # the bucket must be this account's: finance's figures never land in a bucket someone else
        # created under the name (S3 answers 403 AccessDenied then)
        found.s3.put_object(
            Bucket=settings.bucket,
            Key=key,
            Body=body.encode(),
            ContentType="text/csv",
            ExpectedBucketOwner=account,
        )

    return export_usage(
        scheduled.time,
        (
            ExportedCluster(
                c.cluster_name, c.created_at, c.updated_at if c.status is ClusterStatus.DELETED else None
            )
            # the deleted too: one deleted mid-month still gets its closed month's CSV
            for c in every_cluster(found.store, include_deleted=True)
        ),
        usage=found.usage,
        spend=found.spend,
        put_object=put_object,
        prefix=settings.prefix,
    )
