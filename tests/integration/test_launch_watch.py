"""Node launches that fail after their request (autopilot.logic.launch_watch), run as ClusterEventsFunction
itself (its role's permissions checked) on what HyperPod sends:
- a scale-up whose new instance fails its lifecycle scripts: the ScaleInstanceGroup operation, RUNNING
  until the update is over, ends FAILED with the diagnosis, announced as Cluster Operation Failed;
- a Continuous cluster's background launch that gets no capacity: one Node Launch Failed alert with its
  diagnosis, however often the event comes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from autopilot.logic.create_cluster import create_cluster
from autopilot.logic.read_clusters import get_operation
from autopilot.logic.scale_instance_group import scale_instance_group
from autopilot.models.bodies import CreateClusterBody, OperationView
from autopilot.models.records import OperationStatus

from sandbox.emulator.lambda_runtime import LambdaRuntime
from sandbox.harness.stack import ACCOUNT, Deployed
from tests.integration.workflows import dependencies, start, wait
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
STEP = 60.0
CLUSTER = "ml-cluster"
WORKERS = "worker-group-1"
# aws-samples/aws-plugin-for-slurm issue #3 (and aws/res #111): the scripts' bucket refused the instance
ACCESS_DENIED = "fatal error: An error occurred (403) when calling the HeadObject operation: Forbidden"

Record = dict[str, Any]


@pytest.fixture
def cluster_events(make_stack: Any) -> Any:
    """``make(**parameters)``: the stack, and a function that hands the cluster-events queue to the
    deployed ClusterEventsFunction (in-process, as its role) until it is empty; the records it got."""
    runtimes: list[LambdaRuntime] = []

    def make(**parameters: Any) -> tuple[Deployed, Callable[..., list[Record]]]:
        stack = make_stack(clock_speed=0, FallbackPollSeconds=3600, **parameters)
        runtime = LambdaRuntime(region=stack.stack.region, account_id=ACCOUNT)
        runtime.register(stack.stack.function("ClusterEventsFunction"))
        runtimes.append(runtime)
        return stack, lambda records=None: deliver(stack, runtime, records)

    yield make
    for runtime in runtimes:
        runtime.stop()


def deliver(stack: Deployed, runtime: LambdaRuntime, records: list[Record] | None = None) -> list[Record]:
    """The queue's messages (or ``records`` again, a redelivery) to the function, 10 a batch; every
    message must succeed (a denied call would come back as a batch item failure)."""
    sqs = stack.client("sqs")
    url = stack.stack.physical_id("ClusterEventsQueue")
    arn = f"arn:aws:sqs:{stack.stack.region}:{ACCOUNT}:{url.rsplit('/', 1)[-1]}"
    delivered: list[Record] = []
    while True:
        if records is None:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
            batch = [_record(m, arn, stack.stack.region) for m in messages.get("Messages", [])]
        else:
            batch, records = records[:10], records[10:] or []
        if not batch:
            return delivered
        result = runtime.invoke("ClusterEventsFunction", {"Records": batch})
        answer = json.loads(result.payload)
        assert result.function_error is None, json.dumps(answer)[-3000:]
        assert answer == {"batchItemFailures": []}, answer
        delivered += batch
        for record in batch if records is None else []:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=record["receiptHandle"])


def _record(message: dict[str, Any], queue_arn: str, region: str) -> Record:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def run_until(
    stack: Deployed, handle: Callable[[], Any], done: Callable[[], bool], rounds: int = 120
) -> None:
    for _ in range(rounds):
        stack.clock.advance(STEP)
        stack.hyperpod.tick()
        handle()
        if done():
            return
    raise AssertionError(f"not done after {rounds} rounds of {STEP} simulated seconds")


def scale(count: int) -> OperationView:
    answer = scale_instance_group(dependencies(), CLUSTER, WORKERS, count, requested_by="tester")
    assert answer.operation_id
    return get_operation(dependencies(), answer.operation_id)


def alerted(stack: Deployed, event: dict[str, Any]) -> bool:
    """Whether FailedOperationsRule (the alerts topic's rule) matches the event."""
    rule = stack.client("events").describe_rule(Name=stack.stack.physical_id("FailedOperationsRule"))
    pattern = json.loads(rule["EventPattern"])  # source and detail-type lists (moto lacks TestEventPattern)
    return event["source"] in pattern["source"] and event["detail-type"] in pattern["detail-type"]


def test_a_scale_up_whose_new_instance_fails_its_scripts_ends_failed_with_the_diagnosis(
    cluster_events: Any,
) -> None:
    stack, handle = cluster_events()
    assert wait(stack, start(), advance=STEP)["status"] == "SUCCEEDED"
    handle()
    stack.operation_events()  # the create's
    stack.hyperpod.fault_lifecycle_failure(
        cluster=CLUSTER, group=WORKERS, lines=["+ aws s3 cp s3://sagemaker-lcs/on_create.sh .", ACCESS_DENIED]
    )

    operation = scale(5)
    assert operation.status is OperationStatus.RUNNING  # until HyperPod says the update is over
    run_until(
        stack, handle, lambda: get_operation(dependencies(), operation.operation_id).status != "RUNNING"
    )

    ended = get_operation(dependencies(), operation.operation_id)  # GET /operations/{id}
    assert ended.status is OperationStatus.FAILED
    assert ended.error is not None
    assert ended.error.error == "Autopilot.ScaleUpFailed"
    assert "Lifecycle scripts did not run successfully" in ended.error.cause
    diagnosis = ended.diagnosis
    assert diagnosis is not None
    assert diagnosis.category == "s3-access-denied"
    assert diagnosis.evidence[0].line == ACCESS_DENIED
    [failed] = [
        n["InstanceId"]
        for n in stack.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
        if n["InstanceStatus"]["Status"] == "Failure"
    ]
    assert diagnosis.evidence[0].stream == f"LifecycleConfig/{WORKERS}/{failed}"
    [event] = stack.operation_events()
    assert event["detail-type"] == "Cluster Operation Failed"
    assert event["detail"]["operationType"] == "ScaleInstanceGroup"
    assert event["detail"]["diagnosis"]["category"] == "s3-access-denied"
    assert alerted(stack, event)


def test_a_scale_whose_instances_come_up_ends_succeeded(cluster_events: Any) -> None:
    stack, handle = cluster_events()
    assert wait(stack, start(), advance=STEP)["status"] == "SUCCEEDED"
    handle()
    stack.operation_events()

    operation = scale(5)
    run_until(
        stack, handle, lambda: get_operation(dependencies(), operation.operation_id).status != "RUNNING"
    )

    ended = get_operation(dependencies(), operation.operation_id)
    assert ended.status is OperationStatus.SUCCEEDED
    assert ended.diagnosis is None
    [event] = stack.operation_events()
    assert (event["detail-type"], event["detail"]["operationType"]) == (
        "Cluster Operation Succeeded",
        "ScaleInstanceGroup",
    )


def test_a_scale_up_hyperpod_rolled_back_ends_failed_with_the_diagnosis(cluster_events: Any) -> None:
    stack, handle = cluster_events()
    assert wait(stack, start(), advance=STEP)["status"] == "SUCCEEDED"
    handle()
    stack.operation_events()
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge", operation="UpdateCluster")

    operation = scale(5)
    run_until(
        stack, handle, lambda: get_operation(dependencies(), operation.operation_id).status != "RUNNING"
    )

    ended = get_operation(dependencies(), operation.operation_id)
    assert ended.status is OperationStatus.FAILED  # RollingBack, then InService with 4 workers
    assert ended.diagnosis is not None
    assert ended.diagnosis.category == "insufficient-capacity"
    assert ended.diagnosis.evidence[0].stream == "FailureMessage"
    [event] = stack.operation_events()
    assert event["detail"]["diagnosis"]["category"] == "insufficient-capacity"


def _continuous_eks_body() -> dict[str, Any]:
    """The sample create as an EKS cluster with NodeProvisioningMode Continuous (botocore: EKS only)."""
    body = create_body(budget=None)
    del body["provisioningParameters"]
    body["clusterConfig"]["Orchestrator"] = {
        "Eks": {"ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/ml-eks"}
    }
    body["clusterConfig"]["NodeProvisioningMode"] = "Continuous"
    for group in body["clusterConfig"]["InstanceGroups"]:
        group.pop("OnStartDeepHealthChecks", None)  # ~2 h a new instance: longer than these waits
    return body


def test_a_continuous_clusters_failed_background_launch_is_alerted_once_with_its_diagnosis(
    cluster_events: Any,
) -> None:
    stack, handle = cluster_events()
    body = CreateClusterBody.model_validate(_continuous_eks_body())
    created = create_cluster(dependencies(), body, requested_by="tester").operation_id
    assert wait(stack, created, advance=STEP)["status"] == "SUCCEEDED"
    handle()
    stack.operation_events()
    stack.hyperpod.fault_capacity(instance_type="ml.p5.48xlarge", operation="UpdateCluster", times=1)

    operation = scale(5)  # one more worker, launched in the background
    assert operation.status is OperationStatus.SUCCEEDED  # HyperPod took it; launches retry on their own
    records: list[Record] = []
    seen: list[dict[str, Any]] = []

    def launch_alerts() -> list[dict[str, Any]]:
        seen.extend(stack.operation_events())
        return [e for e in seen if e["detail-type"] == "Node Launch Failed"]

    def keep() -> None:
        records.extend(handle())

    run_until(stack, keep, lambda: bool(launch_alerts()))
    errors = [
        r
        for r in records
        if json.loads(r["body"]).get("detail", {}).get("EventDetails", {}).get("EventLevel") == "Error"
    ]
    assert errors
    handle(errors)  # delivered again (EventBridge and SQS deliver at least once)
    run_until(stack, handle, lambda: running_workers(stack) == 5)  # the background retry got capacity

    [alert] = launch_alerts()  # one, for the one instance that failed
    [failed] = {json.loads(r["body"])["detail"]["EventDetails"]["InstanceId"] for r in errors}
    assert alert["detail"]["nodeId"] == failed
    assert alert["detail"]["instanceGroupName"] == WORKERS
    diagnosis = alert["detail"]["diagnosis"]
    assert diagnosis["category"] == "insufficient-capacity"
    assert diagnosis["evidence"][0]["stream"] == "FailureMessage"
    assert "sufficient capacity" in alert["detail"]["failureMessage"]
    assert alerted(stack, alert)


def running_workers(stack: Deployed) -> int:
    nodes = stack.client("sagemaker").list_cluster_nodes(ClusterName=CLUSTER, MaxResults=100)
    return sum(
        1
        for n in nodes["ClusterNodeSummaries"]
        if n["InstanceGroupName"] == WORKERS and n["InstanceStatus"]["Status"] == "Running"
    )
