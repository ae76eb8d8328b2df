"""Why a create failed: read what HyperPod left (its lifecycle logs in CloudWatch Logs, the cluster's
events) and name the cause (autopilot.diagnosis). Called by the Create workflow on its failure path,
through DiagnoseFailureFunction, before any rollback deletes the cluster.

HyperPod writes each instance's lifecycle-script output to the log group
``/aws/sagemaker/Clusters/<cluster-name>/<cluster-id>``, one stream per instance,
``LifecycleConfig/<instance-group>/<instance-id>`` (the exact naming is unconfirmed: docs/sandbox.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from autopilot.aws import error_code
from autopilot.diagnosis.matcher import LIFECYCLE_PREFIX, ClusterEvent, LogLine, LogStream, diagnose
from autopilot.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

    from autopilot.models.records import Diagnosis

# Bounds that keep one diagnosis to a few seconds at any cluster size: the streams read (the instances
# that stopped logging first come first) and the lines of each (a failing script's cause is at its end).
MAX_STREAMS = 100
LINES_PER_STREAM = 500
MAX_EVENTS = 100


class DiagnoseRequest(BaseModel):
    """What the workflow knows of the failed cluster (its Diagnose Failure state's payload)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )

    cluster_name: str
    # None: read from DescribeCluster (the ReplaceNode workflow knows only the cluster's name)
    cluster_arn: str | None = None
    failure_message: str = ""
    # NodeProvisioningMode Continuous: only such clusters have cluster events (ListClusterEvents).
    continuous: bool = False
    # The launches that failed, when known (a replacement's successor): only their streams are read.
    instance_ids: list[str] = Field(default_factory=list)


def lifecycle_log_group(cluster_name: str, cluster_arn: str) -> str:
    return f"/aws/sagemaker/Clusters/{cluster_name}/{cluster_arn.rsplit('/', 1)[-1]}"


def diagnose_failure(request: DiagnoseRequest, *, logs: Any, sagemaker: SageMakerClient) -> Diagnosis:
    """``logs``: a CloudWatch Logs client (no mypy-boto3 stubs for it in the layer)."""
    arn = request.cluster_arn or sagemaker.describe_cluster(ClusterName=request.cluster_name)["ClusterArn"]
    group = lifecycle_log_group(request.cluster_name, arn)
    streams = read_lifecycle_streams(logs, group, only=request.instance_ids)
    events = read_cluster_events(sagemaker, request.cluster_name) if request.continuous else []
    diagnosis = diagnose(
        streams, failure_message=request.failure_message, events=events, instance_ids=request.instance_ids
    )
    logger.info(
        "failure diagnosed",
        cluster=request.cluster_name,
        category=diagnosis.category,
        streams=len(streams),
        events=len(events),
    )
    return diagnosis


def read_lifecycle_streams(logs: Any, group: str, *, only: list[str] | None = None) -> list[LogStream]:
    """The group's lifecycle streams, ``only`` those instances' when given (none when the group does
    not exist: HyperPod wrote nothing)."""
    described: list[dict[str, Any]] = []
    token: str | None = None
    try:
        while True:
            page = logs.describe_log_streams(
                logGroupName=group,
                logStreamNamePrefix=LIFECYCLE_PREFIX,
                **({"nextToken": token} if token else {}),
            )
            described += page.get("logStreams", [])
            token = page.get("nextToken")
            if not token or not page.get("logStreams"):
                break
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return []
        raise
    if only:
        described = [s for s in described if s["logStreamName"].rsplit("/", 1)[-1] in only]
    # a stream with no event yet has no lastEventTimestamp: it stopped (or never started) first
    described.sort(key=lambda s: s.get("lastEventTimestamp", 0))
    streams = [LogStream(s["logStreamName"]) for s in described if not s.get("lastEventTimestamp")]
    for summary in [s for s in described if s.get("lastEventTimestamp")][: MAX_STREAMS - len(streams)]:
        name = summary["logStreamName"]
        page = logs.get_log_events(logGroupName=group, logStreamName=name, limit=LINES_PER_STREAM)
        lines = tuple(LogLine(int(e["timestamp"]), str(e["message"]).rstrip("\n")) for e in page["events"])
        streams.append(LogStream(name, lines))
    return streams


def read_cluster_events(sagemaker: SageMakerClient, cluster_name: str) -> list[ClusterEvent]:
    """The cluster's Error events, oldest first (a launch that failed for want of capacity, a script…)."""
    page = sagemaker.list_cluster_events(
        ClusterName=cluster_name, SortBy="EventTime", SortOrder="Ascending", MaxResults=MAX_EVENTS
    )
    return [
        ClusterEvent(
            int(event["EventTime"].timestamp() * 1000), event.get("Description", ""), event.get("InstanceId")
        )
        for event in page.get("Events", [])
        if event.get("EventLevel") == "Error"
    ]
