"""The SageMaker CreateCluster request, spelled as cluster-config.json spells it.

cluster-config.json is what users pass to ``aws sagemaker create-cluster --cli-input-json``, so the
models use AWS's PascalCase field names and botocore's shape names. Constraints are copied from
botocore's sagemaker model (2017-07-24); tests/unit/validation/test_models_botocore_drift.py compares them
with the installed botocore so that a model update cannot drift silently.

Modelling choices that go beyond botocore's client-side validation, because the service rejects
what they reject: unknown fields are errors, JSON ``null`` is an error, types are strict (the CLI
does not turn "2" into 2), and patterns must match the whole value.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from annotated_types import Len
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from autopilot_config.models.constraints import NAME_PATTERN, IntRange, Text, is_tag_text

_NAME_HINT = "must contain only letters, digits and hyphens, and start and end with a letter or digit"
_ID_HINT = "must contain only letters, digits and hyphens"
_K8S_KEY_PATTERN = (
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
_K8S_VALUE_PATTERN = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_TAG_PATTERN = r"([\p{L}\p{Z}\p{N}_.:/=+\-@]*)"
_TAG_HINT = "may contain only letters, digits, spaces and _ . : / = + - @"

# -- scalar shapes ---------------------------------------------------------------------------------
ClusterNameText = Annotated[str, Text(1, 63, NAME_PATTERN, _NAME_HINT)]
ClusterInstanceGroupName = Annotated[str, Text(1, 63, NAME_PATTERN, _NAME_HINT)]
ClusterPartitionName = Annotated[str, Text(0, 1024, NAME_PATTERN, _NAME_HINT)]
# botocore lists the accepted types as an enum; see instance_types.py for why it is a warning here.
INSTANCE_TYPE_PATTERN = r"ml\.[a-z0-9-]+\.[a-z0-9]+"
ClusterInstanceType = Annotated[
    str, Text(1, None, INSTANCE_TYPE_PATTERN, "must be an instance type like ml.p5.48xlarge")
]
ClusterInstanceCount = Annotated[int, IntRange(0, 6758)]
ClusterThreadsPerCore = Annotated[int, IntRange(1, 2)]
ClusterEbsVolumeSizeInGB = Annotated[int, IntRange(1, 16384)]
NodeUnavailabilityValue = Annotated[int, IntRange(1, None)]
WaitTimeIntervalInSeconds = Annotated[int, IntRange(0, 3600)]
IdleWaitWindowInSecondsValue = Annotated[int, IntRange(3600, 2160000)]
DrainTimeoutInSecondsValue = Annotated[int, IntRange(0, 5400)]
FSxLustreSizeInGiB = Annotated[int, IntRange(1200, 100800)]
FSxLustrePerUnitStorageThroughput = Annotated[int, IntRange(125, 1000)]
ClusterAccountingDatabasePort = Annotated[int, IntRange(1, 65535)]
ClusterInstanceMemoryAllocationPercentage = Annotated[int, IntRange(0, 100)]

S3Uri = Annotated[str, Text(0, 1024, "(https|s3)://([^/]+)/?(.*)", "must be an S3 URI (s3://bucket/prefix/)")]
ClusterLifeCycleConfigFileName = Annotated[str, Text(1, 128, r"[\S\s]+")]
RoleArn = Annotated[
    str,
    Text(
        20,
        2048,
        r"arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+",
        "must be an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)",
    ),
]
KmsKeyId = Annotated[str, Text(0, 2048, "[a-zA-Z0-9:/_-]*", "must be a KMS key ID or ARN")]
ClusterDnsName = Annotated[
    str,
    Text(
        16,
        275,
        r"((fs|fc)i?-[0-9a-f]{8,}\..{4,253})",
        "must be an FSx DNS name (fs-<id>.fsx.<region>.amazonaws.com)",
    ),
]
ClusterMountName = Annotated[
    str, Text(1, 8, "([A-Za-z0-9_-]{1,8})", "must be 1 to 8 letters, digits, '_' or '-'")
]
ClusterFsxMountPath = Annotated[
    str, Text(1, 1024, "/[a-zA-Z0-9._/-]+", "must be an absolute path such as /fsx")
]
TrainingPlanArnText = Annotated[
    str,
    Text(
        50,
        2048,
        r"arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.*",
        "must be a training plan ARN (arn:aws:sagemaker:<region>:<account>:training-plan/<name>)",
    ),
]
SecurityGroupId = Annotated[str, Text(0, 32, "[-0-9a-zA-Z]+", _ID_HINT)]
SubnetId = Annotated[str, Text(0, 32, "[-0-9a-zA-Z]+", _ID_HINT)]
CronScheduleExpression = Annotated[str, Text(1, 256)]
AlarmNameText = Annotated[str, Text(1, 255, r"(?!\s*$).+", "must not be blank")]
ImageIdText = Annotated[
    str, Text(7, 21, "(ami-[0-9a-fA-F]{8,17}|default)", "must be an AMI ID (ami-...) or 'default'")
]
ImageReleaseVersionText = Annotated[
    str, Text(0, 64, r"[0-9]+\.[0-9]+\.[0-9]+", "must be a version such as 1.2.3")
]
ClusterKubernetesLabelKey = Annotated[
    str, Text(1, 317, _K8S_KEY_PATTERN, "must be a Kubernetes label key ([prefix/]name)")
]
ClusterKubernetesLabelValue = Annotated[
    str, Text(1, 63, _K8S_VALUE_PATTERN, "must be a Kubernetes label value")
]
ClusterKubernetesTaintKey = Annotated[
    str, Text(1, 317, _K8S_KEY_PATTERN, "must be a Kubernetes taint key ([prefix/]name)")
]
ClusterKubernetesTaintValue = Annotated[
    str, Text(1, 63, _K8S_VALUE_PATTERN, "must be a Kubernetes taint value")
]
TagKey = Annotated[str, Text(1, 128, _TAG_PATTERN, _TAG_HINT, matcher=is_tag_text)]
TagValue = Annotated[str, Text(0, 256, _TAG_PATTERN, _TAG_HINT, matcher=is_tag_text)]
EksClusterArn = Annotated[
    str,
    Text(
        20,
        2048,
        r"arn:aws[a-z\-]*:eks:[a-z0-9\-]*:[0-9]{12}:cluster\/[0-9A-Za-z][A-Za-z0-9\-_]{0,99}",
        "must be an EKS cluster ARN (arn:aws:eks:<region>:<account>:cluster/<name>)",
    ),
]
ClusterAccountingDatabaseEndpoint = Annotated[
    str,
    Text(
        1,
        255,
        r"(?=.{1,255}$)([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)*",
        "must be a host name",
    ),
]
ClusterAccountingDatabaseName = Annotated[
    str, Text(1, 64, "[a-zA-Z0-9$_]+", "must contain only letters, digits, '$' and '_'")
]
ClusterAccountingDatabaseSecretArn = Annotated[
    str,
    Text(
        20,
        2048,
        r"arn:aws[a-z\-]*:secretsmanager:[a-z0-9\-]*:[0-9]{12}:secret:.+",
        "must be a Secrets Manager secret ARN",
    ),
]
# botocore accepts a datetime, an ISO 8601 string or epoch seconds for timestamps.
Timestamp = Annotated[datetime, Field(strict=False)]

DeepHealthCheckType = Literal["InstanceStress", "InstanceConnectivity", "MultiNodeTrainingValidation"]
NodeUnavailabilityType = Literal["INSTANCE_COUNT", "CAPACITY_PERCENTAGE"]
ClusterPatchingStrategy = Literal["WhenIdle", "WhenAllIdle", "DrainFirst"]
ClusterOnDrainTimeout = Literal["Force", "Skip"]
ClusterKubernetesTaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
ClusterSlurmNodeType = Literal["Controller", "Login", "Compute"]
ClusterInterfaceType = Literal["efa", "efa-only"]
ClusterFSxLustreDeletionPolicy = Literal["DeleteIfNotUsed", "Keep"]
ClusterSlurmConfigStrategy = Literal["Overwrite", "Managed", "Merge"]
ClusterNodeRecovery = Literal["Automatic", "None"]
ClusterConfigMode = Literal["Enable", "Disable"]
ClusterNodeProvisioningMode = Literal["Continuous"]
ClusterAutoScalingMode = Literal["Enable", "Disable"]
ClusterAutoScalerType = Literal["Karpenter"]


class AwsShape(BaseModel):
    """A botocore structure: strict, closed, and built on first use to keep Lambda imports cheap."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _reject_null(cls, value: Any) -> Any:
        # Absent and null differ for AWS: botocore rejects None for every member type.
        if value is None:
            raise PydanticCustomError("null", "must not be null (leave the field out instead)")
        return value


# -- structures ------------------------------------------------------------------------------------
class ClusterLifeCycleConfig(AwsShape):
    SourceS3Uri: S3Uri | None = None
    OnCreate: ClusterLifeCycleConfigFileName | None = None
    OnInitComplete: ClusterLifeCycleConfigFileName | None = None


class ClusterInstanceRequirements(AwsShape):
    InstanceTypes: Annotated[list[ClusterInstanceType], Len(1, 20)]


class ClusterEbsVolumeConfig(AwsShape):
    VolumeSizeInGB: ClusterEbsVolumeSizeInGB | None = None
    VolumeKmsKeyId: KmsKeyId | None = None
    RootVolume: bool | None = None


class ClusterFsxLustreConfig(AwsShape):
    DnsName: ClusterDnsName
    MountName: ClusterMountName
    MountPath: ClusterFsxMountPath | None = None


class ClusterFsxOpenZfsConfig(AwsShape):
    DnsName: ClusterDnsName
    MountPath: ClusterFsxMountPath | None = None


class ClusterInstanceStorageConfig(AwsShape):
    """A botocore union: exactly one member is set."""

    EbsVolumeConfig: ClusterEbsVolumeConfig | None = None
    FsxLustreConfig: ClusterFsxLustreConfig | None = None
    FsxOpenZfsConfig: ClusterFsxOpenZfsConfig | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ClusterInstanceStorageConfig:
        if len(self.model_fields_set) != 1:
            raise PydanticCustomError(
                "union", "must set exactly one of EbsVolumeConfig, FsxLustreConfig, FsxOpenZfsConfig"
            )
        return self


class VpcConfig(AwsShape):
    SecurityGroupIds: Annotated[list[SecurityGroupId], Len(1, 5)]
    Subnets: Annotated[list[SubnetId], Len(1, 16)]


# The field of the same name would shadow the class inside the models that use it.
_VpcConfig = VpcConfig


class CapacitySizeConfig(AwsShape):
    Type: NodeUnavailabilityType
    Value: NodeUnavailabilityValue


class RollingDeploymentPolicy(AwsShape):
    MaximumBatchSize: CapacitySizeConfig
    RollbackMaximumBatchSize: CapacitySizeConfig | None = None


class AlarmDetails(AwsShape):
    AlarmName: AlarmNameText


class DeploymentConfiguration(AwsShape):
    RollingUpdatePolicy: RollingDeploymentPolicy | None = None
    WaitIntervalInSeconds: WaitTimeIntervalInSeconds | None = None
    AutoRollbackConfiguration: Annotated[list[AlarmDetails], Len(1, 10)] | None = None


class ScheduledUpdateConfig(AwsShape):
    ScheduleExpression: CronScheduleExpression
    DeploymentConfig: DeploymentConfiguration | None = None


# The field of the same name would shadow the class inside the models that use it.
_ScheduledUpdateConfig = ScheduledUpdateConfig


class ClusterPatchSchedule(AwsShape):
    NextPatchDate: Timestamp | None = None


class ClusterDrainPolicy(AwsShape):
    DrainTimeoutInSeconds: DrainTimeoutInSecondsValue | None = None
    OnDrainTimeout: ClusterOnDrainTimeout | None = None


class ClusterAutoPatchConfig(AwsShape):
    PatchingStrategy: ClusterPatchingStrategy
    PatchSchedule: ClusterPatchSchedule | None = None
    DeploymentConfig: DeploymentConfiguration | None = None
    IdleWaitWindowInSeconds: IdleWaitWindowInSecondsValue | None = None
    DrainPolicy: ClusterDrainPolicy | None = None


class ClusterKubernetesTaint(AwsShape):
    Key: ClusterKubernetesTaintKey
    Value: ClusterKubernetesTaintValue | None = None
    Effect: ClusterKubernetesTaintEffect


class ClusterKubernetesConfig(AwsShape):
    Labels: Annotated[dict[ClusterKubernetesLabelKey, ClusterKubernetesLabelValue], Len(0, 50)] | None = None
    Taints: Annotated[list[ClusterKubernetesTaint], Len(0, 50)] | None = None


class ClusterSlurmConfig(AwsShape):
    NodeType: ClusterSlurmNodeType
    PartitionNames: Annotated[list[ClusterPartitionName], Len(0, 1)] | None = None


class ClusterSpotOptions(AwsShape):
    pass


class ClusterOnDemandOptions(AwsShape):
    pass


class ClusterCapacityRequirements(AwsShape):
    Spot: ClusterSpotOptions | None = None
    OnDemand: ClusterOnDemandOptions | None = None


class ClusterNetworkInterface(AwsShape):
    InterfaceType: ClusterInterfaceType | None = None


DeepHealthChecks = Annotated[list[DeepHealthCheckType], Len(1, 3)]
ClusterInstanceStorageConfigs = Annotated[list[ClusterInstanceStorageConfig], Len(0, 4)]


class ClusterInstanceGroupSpecification(AwsShape):
    InstanceCount: ClusterInstanceCount
    MinInstanceCount: ClusterInstanceCount | None = None
    InstanceGroupName: ClusterInstanceGroupName
    InstanceType: ClusterInstanceType | None = None
    InstanceRequirements: ClusterInstanceRequirements | None = None
    LifeCycleConfig: ClusterLifeCycleConfig | None = None
    ExecutionRole: RoleArn
    ThreadsPerCore: ClusterThreadsPerCore | None = None
    InstanceStorageConfigs: ClusterInstanceStorageConfigs | None = None
    OnStartDeepHealthChecks: DeepHealthChecks | None = None
    TrainingPlanArn: TrainingPlanArnText | None = None
    OverrideVpcConfig: VpcConfig | None = None
    ScheduledUpdateConfig: _ScheduledUpdateConfig | None = None
    ImageId: ImageIdText | None = None
    AutoPatchConfig: ClusterAutoPatchConfig | None = None
    ImageReleaseVersion: ImageReleaseVersionText | None = None
    KubernetesConfig: ClusterKubernetesConfig | None = None
    SlurmConfig: ClusterSlurmConfig | None = None
    CapacityRequirements: ClusterCapacityRequirements | None = None
    NetworkInterface: ClusterNetworkInterface | None = None


class FSxLustreConfig(AwsShape):
    SizeInGiB: FSxLustreSizeInGiB
    PerUnitStorageThroughput: FSxLustrePerUnitStorageThroughput


# The field of the same name would shadow the class inside the models that use it.
_FSxLustreConfig = FSxLustreConfig


class EnvironmentConfig(AwsShape):
    FSxLustreConfig: _FSxLustreConfig | None = None


# The field of the same name would shadow the class inside the models that use it.
_EnvironmentConfig = EnvironmentConfig


class ClusterRestrictedInstanceGroupSpecification(AwsShape):
    InstanceCount: ClusterInstanceCount
    InstanceGroupName: ClusterInstanceGroupName
    InstanceType: ClusterInstanceType
    ExecutionRole: RoleArn
    ThreadsPerCore: ClusterThreadsPerCore | None = None
    InstanceStorageConfigs: ClusterInstanceStorageConfigs | None = None
    OnStartDeepHealthChecks: DeepHealthChecks | None = None
    TrainingPlanArn: TrainingPlanArnText | None = None
    OverrideVpcConfig: VpcConfig | None = None
    ScheduledUpdateConfig: _ScheduledUpdateConfig | None = None
    EnvironmentConfig: _EnvironmentConfig | None = None


class ClusterSharedEnvironmentConfig(AwsShape):
    FSxLustreDeletionPolicy: ClusterFSxLustreDeletionPolicy
    FSxLustreConfig: _FSxLustreConfig


class ClusterRestrictedInstanceGroupsConfig(AwsShape):
    SharedEnvironmentConfig: ClusterSharedEnvironmentConfig


class Tag(AwsShape):
    Key: TagKey
    Value: TagValue


class ClusterOrchestratorEksConfig(AwsShape):
    ClusterArn: EksClusterArn


class ClusterAccountingDatabase(AwsShape):
    Endpoint: ClusterAccountingDatabaseEndpoint
    Port: ClusterAccountingDatabasePort | None = None
    Name: ClusterAccountingDatabaseName | None = None
    SecretArn: ClusterAccountingDatabaseSecretArn


class ClusterOrchestratorSlurmConfig(AwsShape):
    SlurmConfigStrategy: ClusterSlurmConfigStrategy | None = None
    AccountingDatabase: ClusterAccountingDatabase | None = None


class ClusterOrchestrator(AwsShape):
    Eks: ClusterOrchestratorEksConfig | None = None
    Slurm: ClusterOrchestratorSlurmConfig | None = None


class ClusterTieredStorageConfig(AwsShape):
    Mode: ClusterConfigMode
    InstanceMemoryAllocationPercentage: ClusterInstanceMemoryAllocationPercentage | None = None


class ClusterAutoScalingConfig(AwsShape):
    Mode: ClusterAutoScalingMode
    AutoScalerType: ClusterAutoScalerType | None = None


class CreateClusterRequest(AwsShape):
    """The whole of cluster-config.json: the body of ``sagemaker:CreateCluster``."""

    ClusterName: ClusterNameText
    InstanceGroups: Annotated[list[ClusterInstanceGroupSpecification], Len(1, 100)] | None = None
    RestrictedInstanceGroups: (
        Annotated[list[ClusterRestrictedInstanceGroupSpecification], Len(1, 100)] | None
    ) = None
    RestrictedInstanceGroupsConfig: ClusterRestrictedInstanceGroupsConfig | None = None
    VpcConfig: _VpcConfig | None = None
    Tags: Annotated[list[Tag], Len(0, 50)] | None = None
    Orchestrator: ClusterOrchestrator | None = None
    NodeRecovery: ClusterNodeRecovery | None = None
    TieredStorageConfig: ClusterTieredStorageConfig | None = None
    NodeProvisioningMode: ClusterNodeProvisioningMode | None = None
    ClusterRole: RoleArn | None = None
    AutoScaling: ClusterAutoScalingConfig | None = None

    def to_request(self) -> dict[str, Any]:
        """The keyword arguments for ``sagemaker_client.create_cluster(**...)``."""
        return self.model_dump(exclude_unset=True)
