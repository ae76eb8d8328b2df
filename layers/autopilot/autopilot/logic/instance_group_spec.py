"""An instance group re-specified for UpdateCluster from what DescribeCluster says of it.

UpdateCluster takes a whole ClusterInstanceGroupSpecification per group it names, and the group
becomes what was sent: a member left out is reset (KubernetesConfig's labels and taints are declared
state HyperPod reconciles the nodes to; an omitted ImageReleaseVersion means "the latest"). So a
resize (scale-to-min, PUT /clusters/{name}/instance-groups/{group}) sends back every member the
specification has, each read from its DescribeCluster counterpart (ClusterInstanceGroupDetails), and
changes only InstanceCount. ``SPEC_SOURCES`` names, for every member of botocore's
ClusterInstanceGroupSpecification, where it comes from; tests/unit/test_instance_group_spec.py fails
when botocore's model has a member this table does not name.

Assumptions AWS does not document (docs/sandbox.md, "Unverified against AWS"): a pending change is
re-sent as the Desired* value (else the Current* one); ImageId (the AMI the group runs) is sent, and
ImageReleaseVersion only when DescribeCluster shows no image id, as a group names one or the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# ClusterInstanceGroupSpecification member -> how it is read from ClusterInstanceGroupDetails:
# "copy" (the same name and members), "count" (the caller's), or the conversion below.
SPEC_SOURCES: dict[str, str] = {
    "InstanceGroupName": "copy",
    "InstanceType": "copy",  # left out when InstanceRequirements is sent: the two exclude each other
    "LifeCycleConfig": "copy",
    "ExecutionRole": "copy",
    "ThreadsPerCore": "copy",
    "InstanceStorageConfigs": "copy",
    "OnStartDeepHealthChecks": "copy",
    "TrainingPlanArn": "copy",
    "OverrideVpcConfig": "copy",
    "ScheduledUpdateConfig": "copy",
    "CapacityRequirements": "copy",
    "SlurmConfig": "copy",
    "NetworkInterface": "copy",
    "InstanceCount": "count",
    "MinInstanceCount": "MinCount",
    "InstanceRequirements": "InstanceRequirements: {Desired|Current}InstanceTypes -> InstanceTypes",
    "KubernetesConfig": "KubernetesConfig: {Desired|Current}Labels/Taints -> Labels/Taints",
    "AutoPatchConfig": "AutoPatchConfig: {Desired|Current}PatchSchedule -> PatchSchedule",
    "ImageId": "DesiredImageId | CurrentImageId",
    "ImageReleaseVersion": "DesiredImageReleaseVersion | CurrentImageReleaseVersion, without ImageId",
}

_COPIED = tuple(member for member, source in SPEC_SOURCES.items() if source == "copy")
# ClusterAutoPatchConfig members ClusterAutoPatchConfigDetails has under the same name and shape.
_PATCH_COPIED = ("PatchingStrategy", "DeploymentConfig", "IdleWaitWindowInSeconds", "DrainPolicy")


def _desired(details: Mapping[str, Any], member: str) -> Any:
    """A Desired*/Current* pair's value to declare: the pending one if any, else the current one.
    Presence decides, not truth: an empty DesiredLabels asks for no labels."""
    if f"Desired{member}" in details:
        return details[f"Desired{member}"]
    return details.get(f"Current{member}")


def group_spec(group: Mapping[str, Any], instance_count: int) -> dict[str, Any]:
    """UpdateCluster's ClusterInstanceGroupSpecification of a DescribeCluster group, as it is but for
    its InstanceCount."""
    spec: dict[str, Any] = {k: group[k] for k in _COPIED if k in group}
    spec["InstanceCount"] = instance_count
    if "MinCount" in group:
        spec["MinInstanceCount"] = int(group["MinCount"])
    requirements = group.get("InstanceRequirements")
    if requirements is not None:
        types = _desired(requirements, "InstanceTypes")
        if types:
            spec["InstanceRequirements"] = {"InstanceTypes": types}
            spec.pop("InstanceType", None)
    kubernetes = group.get("KubernetesConfig")
    if kubernetes is not None:
        declared = {k: _desired(kubernetes, k) for k in ("Labels", "Taints")}
        spec["KubernetesConfig"] = {k: v for k, v in declared.items() if v is not None}
    patching = group.get("AutoPatchConfig")
    if patching is not None and "PatchingStrategy" in patching:  # the specification requires it
        patch = {k: patching[k] for k in _PATCH_COPIED if k in patching}
        schedule = _desired(patching, "PatchSchedule")
        if schedule is not None:
            patch["PatchSchedule"] = schedule
        spec["AutoPatchConfig"] = patch
    image = _desired(group, "ImageId")
    if image is not None:
        spec["ImageId"] = image
    else:
        release = _desired(group, "ImageReleaseVersion")
        if release is not None:
            spec["ImageReleaseVersion"] = release
    return spec
