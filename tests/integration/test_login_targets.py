"""Login nodes kept in their ELBv2 target groups (issue 25), on the template deployed into moto with the
HyperPod simulator: LoginTargetsFunction's core registers the login group's IPs on each group's port, a
replacement moves the registration to the successor, and the healing sweep repairs drift."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from autopilot.dal.state_table import StateTable
from autopilot.logic.agent.trust import ControllerReader
from autopilot.logic.healing.login_target_drift import repair_login_targets
from autopilot.logic.login_targets import KeepTargetsRequest, LoginTargets, keep_targets

from sandbox.emulator import seams
from sandbox.harness.stack import Deployed, deployed
from tests.samples import create_body

CLUSTER = "ml-cluster"
LOGIN = "login-group"
NODE_TYPES = {"controller-machine": "Controller", LOGIN: "Login", "worker-group-1": "Compute"}


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with deployed(execute=False) as d, seams.installed(seams.hold_elbv2_targets_as_aws, clock=d.clock):
        yield d


def store(stack: Deployed) -> StateTable:
    return StateTable(str(stack.stack.physical_id("StateTable")), client=stack.client("dynamodb"))


def targets(stack: Deployed) -> LoginTargets:
    return LoginTargets(
        elbv2=stack.client("elbv2"),
        reader=ControllerReader(sagemaker=stack.client("sagemaker"), s3=stack.client("s3")),
    )


def target_group(stack: Deployed, name: str = "autopilot-login-ssh", port: int = 22) -> str:
    """An ``ip`` target group behind a Network Load Balancer, in a VPC of its own: the simulator's node
    IPs are outside it, registered with AvailabilityZone all (as a peered VPC's are)."""
    ec2, elbv2 = stack.client("ec2"), stack.client("elbv2")
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/24")["Subnet"]["SubnetId"]
    arn = str(
        elbv2.create_target_group(Name=name, Protocol="TCP", Port=port, VpcId=vpc, TargetType="ip")[
            "TargetGroups"
        ][0]["TargetGroupArn"]
    )
    balancer = elbv2.create_load_balancer(Name=f"{name}-nlb"[:32], Type="network", Subnets=[subnet])
    elbv2.create_listener(
        LoadBalancerArn=balancer["LoadBalancers"][0]["LoadBalancerArn"],
        Protocol="TCP",
        Port=port,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": arn}],
    )
    return arn


def make_cluster(stack: Deployed, *arns: str, login_count: int = 1) -> None:
    """An InService Slurm cluster (SlurmConfig node types) registered ACTIVE with the target groups."""
    config = {k: v for k, v in create_body(CLUSTER)["clusterConfig"].items() if k != "Tags"}
    for group in config["InstanceGroups"]:
        group.pop("OnStartDeepHealthChecks", None)
        group["SlurmConfig"] = {"NodeType": NODE_TYPES[group["InstanceGroupName"]]}
        if group["InstanceGroupName"] == LOGIN:
            group["InstanceCount"] = login_count
    stack.client("sagemaker").create_cluster(**config)
    stack.clock.advance(3600)
    stack.hyperpod.tick()
    item: dict[str, Any] = {
        "pk": {"S": f"CLUSTER#{CLUSTER}"},
        "sk": {"S": f"CLUSTER#{CLUSTER}"},
        "kind": {"S": "CLUSTER"},
        "clusterName": {"S": CLUSTER},
        "status": {"S": "ACTIVE"},
        "createdAt": {"S": "2026-11-22T09:00:00.000Z"},
        "updatedAt": {"S": "2026-11-22T09:00:00.000Z"},
        "lastOperationId": {"S": "op-20261122090000-00000000"},
        "loginTargetGroupArns": {"L": [{"S": arn} for arn in arns]},
    }
    stack.client("dynamodb").put_item(TableName=str(stack.stack.physical_id("StateTable")), Item=item)


def login_nodes(stack: Deployed) -> dict[str, str]:
    """Instance id -> private IP of the cluster's login nodes, as SageMaker describes them."""
    sagemaker = stack.client("sagemaker")
    nodes = sagemaker.list_cluster_nodes(ClusterName=CLUSTER)["ClusterNodeSummaries"]
    return {
        n["InstanceId"]: sagemaker.describe_cluster_node(ClusterName=CLUSTER, NodeId=n["InstanceId"])[
            "NodeDetails"
        ]["PrivatePrimaryIp"]
        for n in nodes
        if n["InstanceGroupName"] == LOGIN and n["InstanceStatus"]["Status"] == "Running"
    }


def held(stack: Deployed, arn: str) -> dict[tuple[str, int], str]:
    """(IP, port) -> health state of every target of the group."""
    described = stack.client("elbv2").describe_target_health(TargetGroupArn=arn)
    return {
        (d["Target"]["Id"], d["Target"]["Port"]): d["TargetHealth"]["State"]
        for d in described["TargetHealthDescriptions"]
    }


def keep(stack: Deployed, **request: Any) -> dict[str, Any]:
    return keep_targets(
        KeepTargetsRequest.model_validate({"clusterName": CLUSTER, **request}),
        store=store(stack),
        targets=targets(stack),
    )


def test_the_login_nodes_are_registered_on_each_groups_port(stack: Deployed) -> None:
    ssh, ssm = target_group(stack), target_group(stack, "autopilot-login-web", port=443)
    make_cluster(stack, ssh, ssm, login_count=2)
    ips = sorted(login_nodes(stack).values())
    assert len(ips) == 2

    answer = keep(stack)

    assert answer == {"targetGroups": 2, "registered": ips, "deregistered": []}
    assert set(held(stack, ssh)) == {(ip, 22) for ip in ips}
    assert set(held(stack, ssm)) == {(ip, 443) for ip in ips}
    # kept true: a second call changes nothing
    assert keep(stack) == {"targetGroups": 2, "registered": [], "deregistered": []}


def test_a_cluster_without_target_groups_is_left_alone(stack: Deployed) -> None:
    make_cluster(stack)

    assert keep(stack) == {"targetGroups": 0, "registered": [], "deregistered": []}


def test_a_replaced_login_node_gives_its_place_to_its_successor(stack: Deployed) -> None:
    ssh = target_group(stack)
    make_cluster(stack, ssh)
    keep(stack)
    [(old, old_ip)] = login_nodes(stack).items()
    sagemaker = stack.client("sagemaker")
    sagemaker.batch_replace_cluster_nodes(ClusterName=CLUSTER, NodeIds=[old])
    for _ in range(60):
        stack.clock.advance(60)
        stack.hyperpod.tick()
        if set(login_nodes(stack)) - {old}:
            break
    [(successor, new_ip)] = login_nodes(stack).items()
    assert successor != old

    answer = keep(stack)

    assert answer["registered"] == [new_ip]
    assert answer["deregistered"] == [old_ip]
    assert held(stack, ssh) == {(new_ip, 22): "initial", (old_ip, 22): "draining"}


def test_delete_deregisters_every_target(stack: Deployed) -> None:
    ssh = target_group(stack)
    make_cluster(stack, ssh, login_count=2)
    keep(stack)

    answer = keep(stack, deregisterAll=True)

    ips = login_nodes(stack).values()
    assert sorted(answer["deregistered"]) == sorted(ips)
    assert held(stack, ssh) == {(ip, 22): "draining" for ip in ips}


def test_the_sweep_repairs_a_removed_target_and_a_stale_ip(stack: Deployed) -> None:
    ssh = target_group(stack)
    make_cluster(stack, ssh)
    keep(stack)
    [ip] = login_nodes(stack).values()
    elbv2 = stack.client("elbv2")
    elbv2.deregister_targets(TargetGroupArn=ssh, Targets=[{"Id": ip, "Port": 22}])  # someone removed it
    stale = {"Id": "10.0.9.9", "Port": 22, "AvailabilityZone": "all"}
    elbv2.register_targets(TargetGroupArn=ssh, Targets=[stale])  # an IP no login node has

    outcomes = repair_login_targets(store(stack), targets(stack))

    assert outcomes["login_targets_registered"] == 1
    assert outcomes["login_targets_deregistered"] == 1
    live = {target for target, state in held(stack, ssh).items() if state != "draining"}
    assert live == {(ip, 22)}
    assert repair_login_targets(store(stack), targets(stack))["login_targets_registered"] == 0
