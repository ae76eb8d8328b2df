"""every_cluster: the registry read page by page (SessionGuard, CostTagger and the spend meter use it)."""

from __future__ import annotations

import pytest
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.dal.state_store import every_cluster
from autopilot.models.records import Cluster, ClusterStatus


def _cluster(name: str, status: ClusterStatus = ClusterStatus.ACTIVE) -> Cluster:
    return Cluster(
        cluster_name=name,
        status=status,
        created_at="2026-11-01T00:00:00.000Z",
        updated_at="2026-11-01T00:00:00.000Z",
        last_operation_id="op-1",
    )


@pytest.mark.parametrize("page_size", [1, 2, 3, 100])
def test_every_registered_cluster_across_pages(page_size: int) -> None:
    store = InMemoryStateStore()
    for name in ("c", "a", "d", "b"):
        store.clusters[name] = _cluster(name)
    store.clusters["gone"] = _cluster("gone", ClusterStatus.DELETED)

    names = [c.cluster_name for c in every_cluster(store, page_size=page_size)]

    assert names == ["a", "b", "c", "d"]
