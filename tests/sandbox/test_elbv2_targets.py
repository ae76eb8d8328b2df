"""The ``hold_elbv2_targets_as_aws`` seam (sandbox/emulator/elbv2_targets.py): moto's ELBv2 ``ip`` target
groups register, key, report and drain targets as ELBv2 does, on the sandbox clock; without the seam moto is
kinder (the last test holds that, so a moto upgrade that fixes it is noticed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.elbv2.models import ELBv2Backend

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock

REGION = "us-east-1"


@pytest.fixture
def clock() -> SandboxClock:
    return SandboxClock(speed=0)


@pytest.fixture
def aws(clock: SandboxClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(), seams.installed(seams.hold_elbv2_targets_as_aws, clock=clock):
        yield _network(with_load_balancer=True)


def _network(*, with_load_balancer: bool) -> dict[str, Any]:
    ec2, elbv2 = boto3.client("ec2", REGION), boto3.client("elbv2", REGION)
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/24", AvailabilityZone="us-east-1a")
    group = elbv2.create_target_group(
        Name="autopilot-login-ssh", Protocol="TCP", Port=22, VpcId=vpc, TargetType="ip"
    )["TargetGroups"][0]["TargetGroupArn"]
    if with_load_balancer:
        balancer = elbv2.create_load_balancer(
            Name="login", Type="network", Subnets=[subnet["Subnet"]["SubnetId"]]
        )["LoadBalancers"][0]["LoadBalancerArn"]
        elbv2.create_listener(
            LoadBalancerArn=balancer,
            Protocol="TCP",
            Port=22,
            DefaultActions=[{"Type": "forward", "TargetGroupArn": group}],
        )
    return {"elbv2": elbv2, "group": group}


def _states(aws: dict[str, Any]) -> dict[tuple[str, int], str]:
    described = aws["elbv2"].describe_target_health(TargetGroupArn=aws["group"])
    return {
        (d["Target"]["Id"], d["Target"]["Port"]): d["TargetHealth"]["State"]
        for d in described["TargetHealthDescriptions"]
    }


def _register(aws: dict[str, Any], *targets: dict[str, Any]) -> None:
    aws["elbv2"].register_targets(TargetGroupArn=aws["group"], Targets=list(targets))


def test_an_ip_outside_the_vpc_needs_availability_zone_all(aws: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as refused:
        _register(aws, {"Id": "10.9.0.5", "Port": 22})
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert "not in the VPC" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError, match="cannot have its Availability Zone overridden"):
        _register(aws, {"Id": "10.1.0.5", "Port": 22, "AvailabilityZone": "all"})
    with pytest.raises(ClientError, match="not a private IP address"):
        _register(aws, {"Id": "8.8.8.8", "Port": 22, "AvailabilityZone": "all"})
    assert _states(aws) == {}  # a refused request registers none of its targets

    _register(aws, {"Id": "10.1.0.5", "Port": 22}, {"Id": "10.9.0.5", "Port": 22, "AvailabilityZone": "all"})

    assert set(_states(aws)) == {("10.1.0.5", 22), ("10.9.0.5", 22)}


def test_health_is_initial_until_the_checks_pass(aws: dict[str, Any], clock: SandboxClock) -> None:
    _register(aws, {"Id": "10.1.0.5", "Port": 22}, {"Id": "10.1.0.5", "Port": 2222})

    assert _states(aws) == {("10.1.0.5", 22): "initial", ("10.1.0.5", 2222): "initial"}  # id and port
    clock.advance(5 * 30)  # HealthyThresholdCount x HealthCheckIntervalSeconds
    assert set(_states(aws).values()) == {"healthy"}


def test_a_deregistered_target_drains_for_the_delay(aws: dict[str, Any], clock: SandboxClock) -> None:
    _register(aws, {"Id": "10.1.0.5", "Port": 22})
    clock.advance(300)

    aws["elbv2"].deregister_targets(TargetGroupArn=aws["group"], Targets=[{"Id": "10.1.0.5", "Port": 22}])

    assert _states(aws) == {("10.1.0.5", 22): "draining"}
    clock.advance(299)
    assert _states(aws) == {("10.1.0.5", 22): "draining"}
    clock.advance(1)  # deregistration_delay.timeout_seconds: 300
    assert _states(aws) == {}


def test_a_group_no_load_balancer_uses_shows_its_targets_unused(
    clock: SandboxClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws(), seams.installed(seams.hold_elbv2_targets_as_aws, clock=clock):
        aws = _network(with_load_balancer=False)
        _register(aws, {"Id": "10.1.0.5", "Port": 22})
        clock.advance(3600)

        assert _states(aws) == {("10.1.0.5", 22): "unused"}


def test_without_the_seam_moto_is_kinder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        aws = _network(with_load_balancer=True)
        _register(aws, {"Id": "10.9.0.5", "Port": 22})  # outside the VPC, no AvailabilityZone
        assert _states(aws) == {("10.9.0.5", 22): "healthy"}  # at once
        aws["elbv2"].deregister_targets(TargetGroupArn=aws["group"], Targets=[{"Id": "10.9.0.5"}])
        assert _states(aws) == {}  # no draining


@pytest.mark.parametrize("name", ["register_targets", "deregister_targets", "describe_target_health"])
def test_drift_is_detected(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def moved(self: Any, renamed_argument: Any) -> None:
        raise AssertionError("never called")

    monkeypatch.setattr(ELBv2Backend, name, moved)
    with (
        pytest.raises(seams.SeamDrift, match=rf"ELBv2Backend\.{name} has parameters"),
        seams.installed(seams.hold_elbv2_targets_as_aws),
    ):
        pass
