"""The Create and Cleanup workflows with login target groups (issue 25), on moto's Step Functions executor
with LoginTargetsFunction run in-process: the login nodes are registered once the cluster is InService
(the login group named by provisioning_parameters.json, as the lifecycle scripts read it), and a delete
takes every target out once the cluster is gone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from autopilot.logic.delete_cluster import delete_cluster
from autopilot.logic.read_clusters import get_operation

from tests.integration.test_login_targets import held, login_nodes, make_cluster, target_group
from tests.integration.workflows import dependencies, entered, history, start, wait
from tests.samples import create_body

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
ADMIN = "arn:aws:iam::123456789012:user/tester"
STEP = 60.0


def test_the_create_registers_the_login_nodes_once_the_cluster_is_in_service(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, FallbackPollSeconds=3600)
    ssh = target_group(stack)
    # the lifecycle scripts' provisioning_parameters.json names the login group (no SlurmConfig)
    source = create_body()["clusterConfig"]["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"]
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    stack.client("s3").create_bucket(Bucket=bucket)
    stack.client("s3").put_object(
        Bucket=bucket,
        Key=f"{prefix}provisioning_parameters.json",
        Body=json.dumps(create_body()["provisioningParameters"]).encode(),
    )
    operation_id = start(loginTargetGroupArns=[ssh])

    execution = wait(stack, operation_id, advance=STEP, timeout=180.0)

    assert execution["status"] == "SUCCEEDED"
    assert "Register Login Targets" in entered(history(stack, execution["executionArn"]))
    operation = get_operation(dependencies(), operation_id)
    assert "Register Login Targets" in [s.name for s in operation.steps]
    assert not operation.warnings
    [ip] = login_nodes(stack).values()
    assert set(held(stack, ssh)) == {(ip, 22)}


def test_a_delete_deregisters_every_login_target(make_stack: Any) -> None:
    stack = make_stack(clock_speed=0, AdminPrincipalArns=ADMIN, FallbackPollSeconds=300)
    ssh = target_group(stack)
    make_cluster(stack, ssh, login_count=2)
    ips = set(login_nodes(stack).values())
    outside_the_vpc = [{"Id": ip, "Port": 22, "AvailabilityZone": "all"} for ip in ips]
    stack.client("elbv2").register_targets(TargetGroupArn=ssh, Targets=outside_the_vpc)

    accepted = delete_cluster(dependencies(), "ml-cluster", stack_name=None, requested_by=ADMIN)
    execution = wait(stack, accepted.operation_id, advance=STEP)

    assert execution["status"] == "SUCCEEDED"
    operation = get_operation(dependencies(), accepted.operation_id)
    steps = [s.name for s in operation.steps]
    assert steps[steps.index("Wait For Deletion") + 1] == "Deregister Login Targets"
    # deregistered: draining, or drained already if the cleanup took the group's 300 s (how many
    # simulated seconds it takes depends on the rounds) -- and gone once those 300 s have passed
    assert set(held(stack, ssh).values()) <= {"draining"}
    assert set(held(stack, ssh)) <= {(ip, 22) for ip in ips}
    stack.clock.advance(300)
    assert held(stack, ssh) == {}
