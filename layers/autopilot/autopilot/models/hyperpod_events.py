"""HyperPod's EventBridge events as AWS documents them (events/hyperpod/*.json), and the workflows'
wait requests (on a cluster, on a node), the kinds of message on the cluster-events queue.

Member names are AWS's. Members the samples show but that appear only when configured (Orchestrator,
TrainingPlanArn, EventMetadata ...) are optional; unknown members are kept (``extra="allow"``), since
AWS adds members without notice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from autopilot.models.envelopes import EventBridgeModel

STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
NODE_HEALTH = "SageMaker HyperPod Cluster Node Health Event"
CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"
DETAIL_TYPES = (STATE_CHANGE, NODE_HEALTH, CLUSTER_EVENT)
AWAIT_CLUSTER = "await-cluster"
AWAIT_NODE = "await-node"
# What a waiter waits for when the cluster must be gone (DescribeCluster: ResourceNotFound).
DELETED = "Deleted"


class _AwsShape(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class InstanceGroupDetail(_AwsShape):
    InstanceGroupName: str
    InstanceType: str | None = None
    CurrentCount: int | None = None
    TargetCount: int | None = None
    Status: str | None = None


class ClusterStateChangeDetail(_AwsShape):
    ClusterArn: str
    ClusterName: str
    ClusterStatus: str
    # epoch milliseconds, a number (not DescribeCluster's timestamp)
    CreationTime: int
    # always present, "" when there is no failure
    FailureMessage: str = ""
    InstanceGroups: list[InstanceGroupDetail] = Field(default_factory=list)
    NodeRecovery: str | None = None


class HealthSummary(_AwsShape):
    HealthStatus: Literal["Healthy", "Unhealthy"]
    HealthStatusReason: str | None = None
    # What HyperPod itself will do ("None" when NodeRecovery is None). AWS does not spell this out;
    # the healing workflows rely on it (AWS-FACTS.md).
    RepairAction: str | None = None
    Recommendation: str | None = None


class NodeHealthDetail(_AwsShape):
    ClusterName: str
    ClusterArn: str
    InstanceId: str
    Tags: dict[str, str] = Field(default_factory=dict)
    HealthSummary: HealthSummary


class ClusterEventDetails(_AwsShape):
    EventId: str
    ClusterArn: str
    ClusterName: str
    ResourceType: Literal["Cluster", "InstanceGroup", "Instance"]
    EventTime: int | datetime
    Description: str | None = None
    EventLevel: str | None = None
    InstanceGroupName: str | None = None
    InstanceId: str | None = None
    EventDetails: dict[str, Any] | None = None


class ClusterEventDetail(_AwsShape):
    EventDetails: ClusterEventDetails


class ClusterStateChangeEvent(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster State Change"] = Field(alias="detail-type")
    detail: ClusterStateChangeDetail


class NodeHealthEvent(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster Node Health Event"] = Field(alias="detail-type")
    detail: NodeHealthDetail


class ClusterEvent(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster Event"] = Field(alias="detail-type")
    detail: ClusterEventDetail


class AwaitCluster(BaseModel):
    """A workflow's wait request (the "Await Cluster" state of statemachines/*.asl.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    autopilot: Literal["await-cluster"]
    cluster_name: str = Field(alias="clusterName", min_length=1)
    # a SageMaker ClusterStatus, or "Deleted" for a cluster that must be gone
    until: str = Field(min_length=1)
    task_token: str = Field(alias="taskToken", min_length=1)
    execution_arn: str = Field(alias="executionArn", min_length=1)


class AwaitNode(BaseModel):
    """A repair's wait request (the "Await Node" state of statemachines/replace_node.asl.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    autopilot: Literal["await-node"]
    cluster_name: str = Field(alias="clusterName", min_length=1)
    # the repaired node, or the successor a replace brought
    node_id: str = Field(alias="nodeId", min_length=1)
    # Running, and no Unhealthy report held for it (autopilot.workflows.node_waits)
    until: Literal["Healthy"]
    task_token: str = Field(alias="taskToken", min_length=1)
    execution_arn: str = Field(alias="executionArn", min_length=1)
