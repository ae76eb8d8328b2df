"""The tagging seam: the Resource Groups Tagging API sees the simulated HyperPod clusters.

moto's ``ResourceGroupsTaggingAPIBackend`` answers GetResources, GetTagKeys and GetTagValues (and
finds the owner of an ARN for TagResources / UntagResources) by walking
``iter_taggable_backends(account_id, region)``, a name its module imports from
``moto.core.resource_tagging``; each backend it yields lists its resources through
``iter_tagged_resources()``. The simulated clusters live in the HyperPod simulator, not in moto's
SageMaker backend, so that walk never met them and a cleanup check "nothing tagged ClusterName=x
left" proved nothing. ``install_tagging_seam`` rebinds the name in that module to a walk that
yields, first, a view of the simulator serving the (account, region) (every pair has one while
the seam is installed: registry.py), then moto's own backends. moto's TagFilters,
ResourceTypeFilters, ResourceARNList and pagination apply unchanged.

A cluster shows while the simulator holds it (Creating ... Deleting) with its current tags, and
is gone once DeleteCluster has finished, as in AWS. The seam's assumptions about moto are pinned by
tests/sandbox/test_hyperpod_tagging.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, ClassVar, cast

from moto.core.resource_tagging import TaggableResourcesMixin, TaggedResource
from moto.resourcegroupstaggingapi import models as tagging_models
from moto.resourcegroupstaggingapi.exceptions import ResourceGroupsTaggingAPIError

from sandbox.services.hyperpod.registry import SIMULATORS
from sandbox.services.hyperpod.validation import HyperPodApiError

if TYPE_CHECKING:
    from sandbox.services.hyperpod.simulator import HyperPodSimulator

RESOURCE_TYPE = "sagemaker:cluster"
SEAM = "iter_taggable_backends"  # the name moto's tagging backend walks, in its models module

TaggableBackends = Callable[[str, str], Iterator[TaggableResourcesMixin]]

_lock = threading.Lock()  # guards _original
_original: list[TaggableBackends] = []  # moto's own walk while the seam is installed


class SimulatedClusters(TaggableResourcesMixin):
    """One simulator's clusters, shaped as a moto backend the tagging API can walk."""

    SERVICE_NAMESPACE: ClassVar[str] = "sagemaker"

    def __init__(self, simulator: HyperPodSimulator) -> None:
        self.simulator = simulator

    def iter_tagged_resources(self) -> Iterator[TaggedResource]:
        for arn, tags in self.simulator.tagged_clusters():
            yield TaggedResource(arn=arn, tags=tags, resource_type=RESOURCE_TYPE)

    def owns_arn(self, arn: str) -> bool:
        return self.simulator.owns_arn(arn)

    def tag_resource(self, arn: str, tags: dict[str, str]) -> None:
        tag_list = [{"Key": key, "Value": value} for key, value in tags.items()]
        self._call("AddTags", {"ResourceArn": arn, "Tags": tag_list})

    def untag_resource(self, arn: str, tag_keys: list[str]) -> None:
        self._call("DeleteTags", {"ResourceArn": arn, "TagKeys": tag_keys})

    def _call(self, operation: str, params: dict[str, object]) -> None:
        try:
            self.simulator.call(operation, params)
        except HyperPodApiError as error:
            # Answered as the tagging API's own error (moto serializes it with its model).
            raise ResourceGroupsTaggingAPIError("InvalidParameterException", error.message) from error


def tagging_seam_installed() -> bool:
    with _lock:
        return bool(_original)


def install_tagging_seam() -> None:
    """Rebind ``moto.resourcegroupstaggingapi.models.iter_taggable_backends`` to include the simulators."""
    with _lock:
        if _original:
            return
        moto_walk = cast(TaggableBackends, getattr(tagging_models, SEAM))
        _original.append(moto_walk)

        def iter_taggable_backends(account_id: str, region_name: str) -> Iterator[TaggableResourcesMixin]:
            simulator = SIMULATORS.get(account_id, region_name)
            if simulator is not None:
                # First, so TagResources on a simulated cluster's ARN reaches the simulator, not
                # moto's SageMaker backend (which claims every arn:aws:sagemaker: ARN).
                yield SimulatedClusters(simulator)
            yield from moto_walk(account_id, region_name)

        setattr(tagging_models, SEAM, iter_taggable_backends)


def uninstall_tagging_seam() -> None:
    """Give moto's tagging API its own walk back."""
    with _lock:
        if _original:
            setattr(tagging_models, SEAM, _original.pop())
