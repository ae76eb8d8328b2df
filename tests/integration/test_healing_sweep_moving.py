"""The sweep and a node MoveClusterNodes is moving (DetachInProgress / AttachInProgress, botocore 1.44.8):
neither broken nor stuck, and no repair starts on it while it moves."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from autopilot.models.records import NodeHealth

from sandbox.harness.stack import Deployed
from tests.integration.test_healing_sweep import NOW, healing, registered, repairs, stack, sweep

__all__ = ["stack"]  # the fixture


class Moving:
    """The stack's SageMaker client, but ``node`` shows ``status`` (a move the simulator has no cluster
    for: MoveClusterNodes wants EKS clusters in Continuous mode)."""

    def __init__(self, client: Any, node: str, status: str) -> None:
        self._client, self._node, self._status = client, node, status

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def list_cluster_nodes(self, **kwargs: Any) -> dict[str, Any]:
        page = self._client.list_cluster_nodes(**kwargs)
        for summary in page["ClusterNodeSummaries"]:
            if summary["InstanceId"] == self._node:
                summary["InstanceStatus"] = {"Status": self._status}
        return dict(page)


def test_a_moving_node_with_an_unhealthy_report_is_left_until_it_has_moved(stack: Deployed) -> None:
    node = registered(stack, "c1")["worker-group-1"][0]
    healing(stack).record_health(
        "c1", node, NodeHealth.UNHEALTHY, reason="fault type NvidiaErrorTerminate", at=NOW
    )

    for status in ("DetachInProgress", "AttachInProgress"):
        moving = sweep(stack, sagemaker=Moving(stack.client("sagemaker"), node, status)).run(NOW)
        assert "repair_started" not in moving, status
    assert repairs(stack) == []

    arrived = sweep(stack).run(NOW + timedelta(minutes=5))  # Running again: the report held is acted on
    assert arrived["repair_started"] == 1
