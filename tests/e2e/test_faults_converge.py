"""Faults converge: with 20% of every AWS call the control plane makes throttled, or answered 5xx,
30 of 30 creates and 30 of 30 deletes through the API succeed, and the registry agrees with SageMaker.

Each run is seeded (the faults' RNG) and bounded (a deadline per phase). The API's own calls are
faulted too; botocore retries them as on AWS, and a 503 that outlived those retries is retried here
with the same Idempotency-Key, as a client is told to (Retry-After).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from autopilot.dal.state_table import StateTable
from autopilot_cli.client import ApiError, AutopilotClient, new_idempotency_key

from sandbox.harness.core import Sandbox

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning"),
]
CLUSTERS = 30
# A bound on the wall time of each phase, generous for a busy 2-core machine: the subject here is
# convergence, so the workflows' own (simulated) deadlines are far (conftest.E2E_PARAMETERS), and a
# starved control plane is slow rather than failed.
PHASE_TIMEOUT_S = 300.0


def accepted(call: Callable[[str], dict[str, Any]]) -> str:
    """The operation id; a 503 (AWS still throttling after the API's retries) is retried, same key."""
    key = new_idempotency_key()
    for _ in range(5):
        try:
            return str(call(key)["operationId"])
        except ApiError as error:
            if error.status != 503:
                raise
            time.sleep(0.2)
    raise AssertionError("the API answered 503 five times")


def finished(sandbox: Sandbox, machine: str, operation_ids: list[str]) -> None:
    """Until every execution ended (read with the sandbox's own client, which no fault hits)."""
    sfn = sandbox.client("stepfunctions")
    prefix = sandbox.stack.arn(machine).replace(":stateMachine:", ":execution:")
    running = set(operation_ids)
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while running and time.monotonic() < deadline:
        running = {
            o for o in running if sfn.describe_execution(executionArn=f"{prefix}:{o}")["status"] == "RUNNING"
        }
        time.sleep(0.2)
    assert not running, f"{len(running)} executions still RUNNING after {PHASE_TIMEOUT_S} s"


def registry(sandbox: Sandbox, names: list[str]) -> set[tuple[str, str]]:
    """(Autopilot's status, SageMaker's) of each cluster, read past the faults."""
    store = StateTable(sandbox.stack.physical_id("StateTable"), client=sandbox.client("dynamodb"))
    seen: set[tuple[str, str]] = set()
    for name in names:
        cluster = store.get_cluster(name)
        seen.add((cluster.status.value if cluster else "unregistered", sagemaker_status(sandbox, name)))
    return seen


def sagemaker_status(sandbox: Sandbox, name: str) -> str:
    found = sandbox.client("sagemaker").list_clusters(NameContains=name)["ClusterSummaries"]
    return next((str(c["ClusterStatus"]) for c in found if c["ClusterName"] == name), "gone")


def test_every_create_and_delete_succeeds_under_faults_on_every_call(
    api: AutopilotClient, sandbox: Sandbox, workshop_request: Callable[..., dict[str, Any]]
) -> None:
    names = [f"conv-{i:02d}" for i in range(CLUSTERS)]
    assert sandbox.aws_calls is not None
    # one call in five faulted: half of them throttled, half answered 5xx (each kind as the service does)
    sandbox.apply_fault("throttling", {"rate": 0.1, "seed": 8})
    sandbox.apply_fault("server_error", {"rate": 0.1 / 0.9, "seed": 9})
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            creates = list(
                pool.map(
                    lambda n: accepted(
                        lambda key: api.create_cluster(workshop_request(n), idempotency_key=key)
                    ),
                    names,
                )
            )
            finished(sandbox, "CreateClusterStateMachine", creates)
            after_create = registry(sandbox, names)
            deletes = list(
                pool.map(lambda n: accepted(lambda key: api.delete_cluster(n, idempotency_key=key)), names)
            )
            finished(sandbox, "CleanupClusterStateMachine", deletes)
        armed = sandbox.aws_calls.faults.describe()
    finally:
        sandbox.apply_fault("clear", {})

    assert all(fault["hits"] > CLUSTERS for fault in armed), armed
    created = [api.get_operation(o) for o in creates]
    assert [o["status"] for o in created] == ["SUCCEEDED"] * CLUSTERS, [o.get("error") for o in created]
    assert after_create == {("ACTIVE", "InService")}
    deleted = [api.get_operation(o) for o in deletes]
    assert [o["status"] for o in deleted] == ["SUCCEEDED"] * CLUSTERS, [o.get("error") for o in deleted]
    assert registry(sandbox, names) == {("DELETED", "gone")}
