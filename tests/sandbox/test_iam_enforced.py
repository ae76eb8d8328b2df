"""IAM enforced in the sandbox: a template that lacks one permission fails where AWS would.

The template is a copy of the real template.yaml (in tmp_path, next to links to the code it
deploys) with ``sagemaker:CreateCluster`` taken out of the Create workflow's role: POST /clusters
is accepted, and the workflow's CreateCluster task is denied with SageMaker's AccessDeniedException.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autopilot_cli.client import AutopilotClient

from sandbox.apps.demo.runner import DEMO_PARAMETERS, sandbox_api_client
from sandbox.harness.core import DEFAULT_TEMPLATE, Sandbox
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
ROOT = DEFAULT_TEMPLATE.parent
DENIED = "sagemaker:CreateCluster"
# the Create workflow's statement that allows it (tests fail loudly if the template changes)
CLUSTER_ACTIONS = "Action: [sagemaker:CreateCluster, sagemaker:DescribeCluster, sagemaker:ListTags,"


def without_permission(tmp_path: Path) -> Path:
    """A copy of template.yaml whose Create workflow role no longer allows sagemaker:CreateCluster."""
    text = DEFAULT_TEMPLATE.read_text()
    assert text.count(CLUSTER_ACTIONS) == 1
    for code in ("functions", "layers", "statemachines"):
        (tmp_path / code).symlink_to(ROOT / code, target_is_directory=True)
    copy = tmp_path / "template.yaml"
    copy.write_text(text.replace(CLUSTER_ACTIONS, CLUSTER_ACTIONS.replace(f"{DENIED}, ", "")))
    return copy


@pytest.fixture(scope="module")
def denied_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    template = without_permission(tmp_path_factory.mktemp("iam"))
    with Sandbox(template, parameters=DEMO_PARAMETERS, speed=1200.0) as sandbox:
        yield sandbox


def test_the_create_workflow_fails_with_access_denied(denied_sandbox: Sandbox) -> None:
    api: AutopilotClient = sandbox_api_client(denied_sandbox, denied_sandbox.serve_api(0))
    accepted = api.create_cluster(create_body("iam-denied"))

    finished = api.wait_for_operation(accepted["operationId"], timeout_seconds=60, poll_seconds=0.2)

    assert finished["status"] == "FAILED", finished
    history = denied_sandbox.client("stepfunctions").get_execution_history(
        executionArn=finished["executionArn"]
    )["events"]
    # one per attempt the ASL's Retry makes (then Look For Cluster finds none: the create never took effect)
    failures = [
        e["taskFailedEventDetails"]
        for e in history
        if e["type"] == "TaskFailed" and e["taskFailedEventDetails"]["resource"] == "createCluster"
    ]
    assert failures
    for failure in failures:
        # SageMaker does not model AccessDeniedException: Step Functions names it after the service
        assert failure["error"] == "SageMaker.SageMakerException"
        assert "Status Code: 400" in failure["cause"]
        assert f"is not authorized to perform: {DENIED} on resource: arn:aws:sagemaker:" in failure["cause"]
        assert f"because no identity-based policy allows the {DENIED} action" in failure["cause"]
    denials = denied_sandbox.metrics()["iam_denials"]
    assert len(denials) == len(failures)
    for denial in denials:
        assert denial["action"] == DENIED
        assert denial["principal"].startswith(f"arn:aws:sts::{denied_sandbox.account_id}:assumed-role/")
    assert denied_sandbox.client("sagemaker").list_clusters()["ClusterSummaries"] == []


def test_the_real_template_allows_what_the_api_needs(denied_sandbox: Sandbox) -> None:
    """Everything the ApiFunction does for POST /clusters passed its role (only the workflow was denied)."""
    denials: list[dict[str, Any]] = denied_sandbox.metrics()["iam_denials"]
    assert all("ApiFunction" not in d["principal"] for d in denials)
