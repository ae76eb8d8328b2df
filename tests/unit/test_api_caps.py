"""The stack's cost guardrail through the API, with the template's own parameters deployed into moto:
MaxInstancesPerCluster (default 2000) refuses a create and a scale-up past it, naming the field."""

# ruff: noqa: F401, F811  (the `stack` fixture is imported and named by the tests)

from __future__ import annotations

import copy

from sandbox.harness.stack import Deployed
from tests.samples import api_event, create_body
from tests.unit.api_stack import call, stack
from tests.unit.test_api_scale import active_cluster, scale, worker_count


def test_a_create_asking_for_675800_instances_is_refused_naming_the_field(stack: Deployed) -> None:
    body = create_body()
    worker = next(
        g for g in body["clusterConfig"]["InstanceGroups"] if g["InstanceGroupName"] == "worker-group-1"
    )
    body["clusterConfig"]["InstanceGroups"] = [
        {**copy.deepcopy(worker), "InstanceGroupName": f"group-{i}", "InstanceCount": 6758}
        for i in range(100)
    ]

    status, answer = call(api_event("create_cluster", body=body))

    assert status == 400, answer
    [detail] = [e for e in answer["errors"] if e["path"] == "InstanceGroups"]
    assert "675800 instances" in detail["message"]
    assert "MaxInstancesPerCluster" in detail["message"]
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []


def test_a_scale_up_past_the_cap_is_refused_naming_the_field(stack: Deployed) -> None:
    active_cluster(stack)  # controller 1, login 1, workers 4

    status, answer = scale({"instanceCount": 1999})

    assert status == 400, answer
    assert [e["path"] for e in answer["errors"]] == ["instanceCount"]
    assert "2001 instances" in answer["errors"][0]["message"]
    assert worker_count(stack) == 4
    status, answer = scale({"instanceCount": 1998})  # 2000 in all: the cap itself is allowed
    assert status == 200, answer
