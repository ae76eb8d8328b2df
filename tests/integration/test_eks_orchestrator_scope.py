"""EksClusterNames scopes what the CreateCluster workflow may do to EKS clusters (issue 20, finding 4).

The API refuses an ``Orchestrator.Eks.ClusterArn`` outside the stack's list; and even a create that got
past it (here: the API's logic with a validator that does not know the list) cannot give HyperPod's
nodes access to another EKS cluster, because the workflow's role holds its EKS permissions
(CreateClusterEksAccess) on the listed clusters only: the sandbox authorizes CreateCluster as the
caller's ``eks:DescribeCluster`` and ``eks:CreateAccessEntry`` on the cluster it names.
"""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.errors import InvalidRequestError
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.read_clusters import get_operation
from autopilot.models.bodies import CreateClusterBody
from autopilot.settings import api_settings
from autopilot_config.validation import validate_config

from sandbox.harness.stack import ACCOUNT, REGION
from tests.integration.workflows import dependencies, wait
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
STEP = 60.0


def eks_body(name: str, eks_cluster: str) -> CreateClusterBody:
    body = create_body(name, budget=None)
    del body["provisioningParameters"]
    body["clusterConfig"]["Orchestrator"] = {
        "Eks": {"ClusterArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{eks_cluster}"}
    }
    return CreateClusterBody.model_validate(body)


def test_only_the_stacks_eks_clusters_can_orchestrate_a_cluster(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600, EksClusterNames="team-*")

    with pytest.raises(InvalidRequestError) as refused:
        create_cluster(dependencies(), eks_body("finance-nodes", "finance-eks"), requested_by="tester")
    assert [(e.path, e.message) for e in refused.value.errors] == [
        (
            "Orchestrator.Eks.ClusterArn",
            "EKS cluster 'finance-eks' is not one of this Autopilot stack's EksClusterNames (team-*)",
        )
    ]

    unchecked = Dependencies(api_settings(), validator=lambda config, provisioning: validate_config(config))
    operation_id = create_cluster(
        unchecked, eks_body("finance-nodes", "finance-eks"), requested_by="x"
    ).operation_id
    assert wait(stack, operation_id, advance=STEP)["status"] == "FAILED"
    error = get_operation(dependencies(), operation_id).error
    assert error is not None
    assert "eks:DescribeCluster" in error.cause
    assert stack.client("sagemaker").list_clusters()["ClusterSummaries"] == []

    operation_id = create_cluster(
        dependencies(), eks_body("team-nodes", "team-vision"), requested_by="x"
    ).operation_id
    assert wait(stack, operation_id, advance=STEP)["status"] == "SUCCEEDED"
