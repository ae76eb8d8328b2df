"""The cluster lifecycle end to end in the sandbox, through the HTTP API with signed requests.

create → InService → tagged → budget → delete → gone (budget too); a capacity failure is recorded
with its cause; a bad config is refused naming the fields; an unsigned call is refused.

The sandbox's FallbackPollSeconds is longer than a create here, so a create that finishes finished on
HyperPod's InService event (a delete ends on its fallback check: HyperPod sends no event when a
cluster is gone). The clock is frozen and stepped by the waits, and it stays put while that event is
on its way to the workflow: however slow the machine, the fallback cannot come first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3
from autopilot_cli.client import ApiError, AutopilotClient
from botocore.exceptions import ClientError

from sandbox.apps.demo.runner import DEMO_PARAMETERS, state_entries
from sandbox.harness.core import Sandbox

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
OPERATION_TIMEOUT_S = 60.0
# simulated seconds: past a 20-minute create
FALLBACK_POLL_SECONDS = 3600
# simulated seconds the frozen clock moves between two polls of an operation (a 5-minute schedule
# fires at each step; a delete's fallback check comes at the 12th)
STEP_S = 300.0
# Hold = a test's reason to keep the clock still at a poll (it gets the operation as last read)
Hold = Callable[[dict[str, Any]], bool]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    parameters = {**DEMO_PARAMETERS, "FallbackPollSeconds": FALLBACK_POLL_SECONDS}
    with Sandbox(parameters=parameters, speed=0) as running:
        yield running


def wait(
    api: AutopilotClient, sandbox: Sandbox, operation_id: str, *, hold: Hold | None = None
) -> dict[str, Any]:
    """The operation once it ended, the clock stepped STEP_S between polls unless ``hold`` says not."""
    last: dict[str, Any] = {}

    def step(seconds: float) -> None:
        if hold is None or not hold(last):
            sandbox.advance(STEP_S)
        time.sleep(seconds)

    return api.wait_for_operation(
        operation_id,
        timeout_seconds=OPERATION_TIMEOUT_S,
        poll_seconds=0.05,
        on_progress=last.update,
        sleep=step,
    )


def until_in_service_answered(sandbox: Sandbox, name: str) -> Hold:
    """Holds the clock from when HyperPod's InService event for ``name`` is due until the create's
    Await Cluster has ended (whatever answered it): the wait's FallbackPollSeconds timeout cannot
    come before the event however long the event takes in wall time."""
    sagemaker, sfn = sandbox.client("sagemaker"), sandbox.client("stepfunctions")
    due: list[datetime] = []

    def hold(operation: dict[str, Any]) -> bool:
        if not due:
            try:
                status = sagemaker.describe_cluster(ClusterName=name)["ClusterStatus"]
            except sagemaker.exceptions.ResourceNotFound:
                return False  # the workflow has not called CreateCluster yet (a busy machine)
            if status == "InService":
                due.append(sandbox.clock.now() + timedelta(seconds=sandbox.hyperpod.timings.event_delivery))
            return False
        if sandbox.clock.now() < due[0]:
            return False
        entered = state_entries(sfn, operation["executionArn"])
        return not set(entered) - {"Check Input", "Create Cluster", "Await Cluster"}

    return hold


def error_code(call: Callable[[], Any]) -> str | None:
    try:
        call()
    except ClientError as error:
        return str(error.response["Error"]["Code"])
    return None


def test_create_then_delete_leaves_nothing(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    sagemaker, budgets = sandbox.client("sagemaker"), sandbox.client("budgets")
    body = workshop_request("e2e-life")

    accepted = api.create_cluster(body)
    assert accepted["status"] == "RUNNING"
    created = wait(api, sandbox, accepted["operationId"], hold=until_in_service_answered(sandbox, "e2e-life"))

    assert created["status"] == "SUCCEEDED", created.get("error")
    assert created["kind"] == "CreateCluster"
    assert created["executionArn"].split(":")[-1] == accepted["operationId"]
    entered = state_entries(sandbox.client("stepfunctions"), created["executionArn"])
    # the create and its workers' ~2 h deep health checks outlast FallbackPollSeconds: each wait that
    # ended at it was checked (DescribeCluster) and waited again; that the InService event itself ends a
    # wait: test_asl_create_cluster.py::test_happy_path_resumes_on_the_state_change_event
    assert 1 <= entered["Check Cluster"] <= entered["Await Cluster"]
    described = sagemaker.describe_cluster(ClusterName="e2e-life")
    assert described["ClusterStatus"] == "InService"
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=described["ClusterArn"])["Tags"]}
    assert tags["ClusterName"] == "e2e-life"
    assert tags["owner"] == "alice"
    assert tags["project"] == body["project"]
    assert tags["autopilot:operation-id"] == accepted["operationId"]
    view = api.get_cluster("e2e-life")
    assert view["status"] == "ACTIVE"
    budget = budgets.describe_budget(AccountId=sandbox.account_id, BudgetName=view["budgetName"])["Budget"]
    assert budget["BudgetLimit"] == {"Amount": "2500.00", "Unit": "USD"}
    assert budget["CostFilters"] == {"TagKeyValue": ["user:ClusterName$e2e-life"]}
    notifications = budgets.describe_notifications_for_budget(
        AccountId=sandbox.account_id, BudgetName=view["budgetName"]
    )["Notifications"]
    assert sorted((n["NotificationType"], n["Threshold"]) for n in notifications) == [
        ("ACTUAL", 50), ("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100),
    ]  # fmt: skip

    deleted = wait(api, sandbox, api.delete_cluster("e2e-life")["operationId"])

    assert deleted["status"] == "SUCCEEDED", deleted.get("error")
    assert deleted["leftovers"] == []
    assert error_code(lambda: sagemaker.describe_cluster(ClusterName="e2e-life")) == "ResourceNotFound"
    assert (
        error_code(
            lambda: budgets.describe_budget(AccountId=sandbox.account_id, BudgetName=view["budgetName"])
        )
        == "NotFoundException"
    )
    assert api.get_cluster("e2e-life")["status"] == "DELETED"


def test_capacity_failure_is_recorded_with_its_cause(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    sandbox.hyperpod.apply_fault("capacity", {"instance_type": "ml.p5.48xlarge"})
    try:
        accepted = api.create_cluster(workshop_request("e2e-nocap", rollbackOnFailure=True))
        recorded = wait(api, sandbox, accepted["operationId"])
    finally:
        sandbox.hyperpod.apply_fault("clear", {})
    # The failure is recorded before the rollback runs: read the record again once the workflow ended.
    assert sandbox.wait_for_execution(recorded["executionArn"], timeout=10)["status"] == "FAILED"
    failed = api.get_operation(accepted["operationId"])

    assert failed["status"] == "FAILED"
    assert failed["error"]["error"] == "Autopilot.ClusterFailed"
    assert "InsufficientInstanceCapacity" in failed["error"]["cause"]
    assert "ml.p5.48xlarge" in failed["error"]["cause"]
    assert "Roll Back Cluster" in [step["name"] for step in failed["steps"]]
    assert api.get_cluster("e2e-nocap")["status"] == "CREATE_FAILED"


def test_bad_config_is_refused_naming_each_field(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    body = workshop_request("e2e-broken")
    body["clusterConfig"]["InstanceGroups"][0]["ThreadsPerCore"] = 3
    del body["clusterConfig"]["VpcConfig"]
    body["provisioningParameters"]["controller_group"] = "no-such-group"

    with pytest.raises(ApiError) as refused:
        api.create_cluster(body)

    assert refused.value.status == 400
    named = {(e.get("file"), e["path"]) for e in refused.value.errors}
    assert ("cluster-config.json", "InstanceGroups[0].ThreadsPerCore") in named
    assert ("cluster-config.json", "VpcConfig") in named
    assert ("provisioning-parameters.json", "controller_group") in named
    with pytest.raises(ApiError) as missing:
        api.get_cluster("e2e-broken")
    assert missing.value.status == 404
    summaries = sandbox.client("sagemaker").list_clusters()["ClusterSummaries"]
    assert "e2e-broken" not in [c["ClusterName"] for c in summaries]


def test_bad_request_shape_is_refused_naming_the_field(
    api: AutopilotClient, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    body = workshop_request("e2e-shape", budget={"monthlyLimitUsd": 0, "alertEmails": []})

    with pytest.raises(ApiError) as refused:
        api.create_cluster(body)

    assert refused.value.status == 400
    assert "budget.monthlyLimitUsd" in {e["path"] for e in refused.value.errors}


def _signed_by_an_unknown_key() -> dict[str, str]:
    # dated now, so the request is refused for its key, not for an expired signature
    now = datetime.now(UTC)
    return {
        "Authorization": f"AWS4-HMAC-SHA256 Credential=AKIANOTAKEY/{now:%Y%m%d}/us-east-1/execute-api/"
        "aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "0" * 64,
        "X-Amz-Date": f"{now:%Y%m%dT%H%M%SZ}",
    }


@pytest.mark.parametrize(
    ("headers", "expected_type"),
    [
        (dict, "MissingAuthenticationTokenException"),
        (_signed_by_an_unknown_key, "UnrecognizedClientException"),
    ],
    ids=["unsigned", "signed-by-nobody"],
)
def test_unauthenticated_call_is_refused(
    api_url: str, headers: Callable[[], dict[str, str]], expected_type: str
) -> None:
    response = urllib3.request("GET", f"{api_url}/clusters", headers=headers(), timeout=10)

    assert response.status == 403
    assert response.headers.get("x-amzn-ErrorType", "").startswith(expected_type)
