"""The Create workflow's failure path names the cause (Diagnose Failure → DiagnoseFailureFunction): a
real lifecycle-log excerpt replayed through the HyperPod simulator's lifecycle_failure fault gives a
FAILED create whose record, GET /operations/{id} and Cluster Operation Failed event carry the diagnosis
with the line as evidence."""

from __future__ import annotations

from typing import Any

import pytest
from autopilot.logic.read_clusters import get_operation

from tests.integration.workflows import dependencies, entered, history, start, wait

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
STEP = 60.0
# aws-samples/aws-plugin-for-slurm issue #3 (and aws/res #111): the scripts' bucket refused the instance
ACCESS_DENIED = "fatal error: An error occurred (403) when calling the HeadObject operation: Forbidden"


def test_a_create_failed_in_its_lifecycle_scripts_is_recorded_with_its_diagnosis(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.hyperpod.fault_lifecycle_failure(
        lines=["+ aws s3 cp s3://sagemaker-lcs/on_create.sh .", ACCESS_DENIED]
    )
    operation_id = start()  # rollbackOnFailure: true: diagnosed before the rollback deletes it

    execution = wait(stack, operation_id, advance=STEP)

    assert execution["status"] == "FAILED"
    states = entered(history(stack, execution["executionArn"]))
    assert states.index("Diagnose Failure") < states.index("Roll Back Cluster")
    operation = get_operation(dependencies(), operation_id)  # GET /operations/{id}
    assert operation.error is not None
    assert "Lifecycle scripts did not run successfully" in operation.error.cause
    diagnosis = operation.diagnosis
    assert diagnosis is not None
    assert diagnosis.category == "s3-access-denied"
    assert diagnosis.confidence == "high"
    assert diagnosis.evidence[0].line == ACCESS_DENIED
    assert diagnosis.evidence[0].stream.startswith("LifecycleConfig/")
    assert "s3:GetObject" in diagnosis.fix
    # GET /operations/{id}'s body
    assert operation.model_dump(mode="json", by_alias=True)["diagnosis"]["category"] == "s3-access-denied"
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"
    assert event["detail"]["diagnosis"]["category"] == "s3-access-denied"
    assert event["detail"]["diagnosis"]["evidence"][0]["line"] == ACCESS_DENIED


def test_a_capacity_failure_is_diagnosed_from_the_failure_message(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge")
    operation_id = start(rollbackOnFailure=False)

    assert wait(stack, operation_id, advance=STEP)["status"] == "FAILED"

    diagnosis = get_operation(dependencies(), operation_id).diagnosis
    assert diagnosis is not None
    assert diagnosis.category == "insufficient-capacity"
    assert diagnosis.evidence[0].stream == "FailureMessage"
