"""The API's use cases on the in-memory state store: what each records and starts, and what it refuses.

The DynamoDB expressions behind the same rules are tested on moto in test_state.py; the HTTP answers
in test_api.py.
"""

from __future__ import annotations

import json
from typing import Any, cast

import boto3
import pytest
from autopilot.dal.in_memory import InMemoryStateStore
from autopilot.errors import ConflictError, NotFoundError, WorkflowStartError
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.delete_cluster import delete_cluster
from autopilot.logic.dependencies import Dependencies
from autopilot.logic.read_clusters import get_operation, list_clusters
from autopilot.models.bodies import CreateClusterBody
from autopilot.models.records import ClusterStatus, OperationStatus
from autopilot.settings import ApiSettings
from autopilot_config.validation import validate_config
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from tests.samples import API_ENVIRONMENT, create_body

USER = "arn:aws:iam::123456789012:user/ann"
SETTINGS = ApiSettings.model_validate(API_ENVIRONMENT)


class FakeStepFunctions:
    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.started: list[dict[str, str]] = []

    def start_execution(self, **request: str) -> dict[str, str]:
        if self.refuse:
            error: Any = {"Error": {"Code": "ServiceUnavailable", "Message": "down"}}
            raise ClientError(error, "StartExecution")
        self.started.append(request)
        return {"executionArn": f"arn:aws:states:us-east-1:123456789012:execution:x:{request['name']}"}


class FakeEvents:
    def __init__(self) -> None:
        self.details: list[dict[str, Any]] = []

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, int]:
        self.details += [json.loads(entry["Detail"]) for entry in Entries]
        return {"FailedEntryCount": 0}


def dependencies(
    store: InMemoryStateStore, sfn: FakeStepFunctions, events: FakeEvents | None = None
) -> Dependencies:
    # A real client for botocore's parameter validation; SageMaker knows no cluster.
    sagemaker = boto3.client("sagemaker", region_name="us-east-1")
    stubber = Stubber(sagemaker)
    for _ in range(3):
        stubber.add_client_error("describe_cluster", service_error_code="ResourceNotFound")
    stubber.activate()
    return Dependencies(
        SETTINGS,
        store,
        sagemaker=sagemaker,
        stepfunctions=cast(Any, sfn),
        events=cast(Any, events or FakeEvents()),
        # the offline rules, without the stack's role patterns and caps
        validator=validate_config,
    )


def body(name: str = "ml-cluster") -> CreateClusterBody:
    return CreateClusterBody.model_validate(create_body(name))


def test_create_registers_the_cluster_and_starts_the_workflow_with_its_cost_tags() -> None:
    store, sfn = InMemoryStateStore(), FakeStepFunctions()

    accepted = create_cluster(dependencies(store, sfn), body(), requested_by=USER)

    operation = get_operation(dependencies(store, sfn), accepted.operation_id)
    assert operation.status is OperationStatus.RUNNING
    assert operation.execution_arn is not None
    assert operation.execution_arn.endswith(accepted.operation_id)
    cluster = store.get_cluster("ml-cluster")
    assert cluster is not None
    assert (cluster.status, cluster.created_by) == (ClusterStatus.CREATING, USER)
    [started] = sfn.started
    assert started["stateMachineArn"] == SETTINGS.create_cluster_state_machine_arn
    workflow_input = json.loads(started["input"])
    assert {tag["Key"]: tag["Value"] for tag in workflow_input["costTags"]}["autopilot:operation-id"] == (
        accepted.operation_id
    )


def test_a_second_create_of_a_live_name_conflicts() -> None:
    store, sfn = InMemoryStateStore(), FakeStepFunctions()
    create_cluster(dependencies(store, sfn), body(), requested_by=USER)

    with pytest.raises(ConflictError, match="is taken"):
        create_cluster(dependencies(store, sfn), body(), requested_by=USER)
    assert len(sfn.started) == 1


def test_a_workflow_that_does_not_start_leaves_a_failed_operation_and_an_event() -> None:
    store, sfn, events = InMemoryStateStore(), FakeStepFunctions(refuse=True), FakeEvents()

    with pytest.raises(WorkflowStartError) as raised:
        create_cluster(dependencies(store, sfn, events), body(), requested_by=USER)

    operation = store.get_operation(raised.value.operation_id)
    assert operation is not None
    assert operation.error is not None
    assert (operation.status, operation.error.error) == (
        OperationStatus.FAILED,
        "StepFunctions.ServiceUnavailable",
    )
    cluster = store.get_cluster("ml-cluster")
    assert cluster is not None
    assert cluster.status is ClusterStatus.CREATE_FAILED
    assert [d["status"] for d in events.details] == ["FAILED"]


def test_a_cluster_still_creating_cannot_be_deleted() -> None:
    store, sfn = InMemoryStateStore(), FakeStepFunctions()
    create_cluster(dependencies(store, sfn), body(), requested_by=USER)

    with pytest.raises(ConflictError, match="is CREATING"):
        delete_cluster(dependencies(store, sfn), "ml-cluster", stack_name=None, requested_by=USER)


def test_deleting_a_cluster_nobody_has_is_not_found() -> None:
    with pytest.raises(NotFoundError):
        delete_cluster(
            dependencies(InMemoryStateStore(), FakeStepFunctions()),
            "nowhere",
            stack_name=None,
            requested_by=USER,
        )


def test_the_list_pages_by_name_and_leaves_deleted_clusters_out() -> None:
    store, sfn = InMemoryStateStore(), FakeStepFunctions()
    for name in ("c3", "c1", "c2"):
        create_cluster(dependencies(store, sfn), body(name), requested_by=USER)
    gone = store.clusters["c2"]
    store.clusters["c2"] = gone.model_copy(update={"status": ClusterStatus.DELETED})
    deps = dependencies(store, sfn)

    first = list_clusters(deps, limit=1, next_token=None, include_deleted=False)
    second = list_clusters(deps, limit=1, next_token=first.next_token, include_deleted=False)

    assert [c.cluster_name for c in first.clusters + second.clusters] == ["c1", "c3"]
    assert second.next_token is None
