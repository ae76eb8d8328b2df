"""The diff of wanted vs registered login targets, and the target group ARN check (logic/login_targets)."""

from __future__ import annotations

from autopilot.logic.login_targets import Target, check_target_group_arns, plan

ARN = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/autopilot-login-ssh/0123456789abcdef"


def test_a_successor_is_registered_and_the_old_ip_deregistered() -> None:
    drift = plan(["10.0.0.2"], 22, [(Target("10.0.0.1", 22), "healthy")])

    assert drift.registered == [Target("10.0.0.2", 22)]
    assert drift.deregistered == [Target("10.0.0.1", 22)]


def test_a_target_held_on_another_port_is_moved_to_the_groups_port() -> None:
    drift = plan(["10.0.0.1"], 22, [(Target("10.0.0.1", 2222), "healthy")])

    assert drift.registered == [Target("10.0.0.1", 22)]
    assert drift.deregistered == [Target("10.0.0.1", 2222)]


def test_targets_in_place_whatever_their_health_are_left_alone() -> None:
    present = [(Target("10.0.0.1", 22), "unhealthy"), (Target("10.0.0.2", 22), "initial")]

    drift = plan(["10.0.0.1", "10.0.0.2"], 22, present)

    assert (drift.registered, drift.deregistered) == ([], [])


def test_a_draining_target_is_not_held_registered_again_when_wanted_left_to_drain_when_not() -> None:
    present = [(Target("10.0.0.1", 22), "draining"), (Target("10.0.0.9", 22), "draining")]

    drift = plan(["10.0.0.1"], 22, present)

    assert drift.registered == [Target("10.0.0.1", 22)]
    assert drift.deregistered == []


def test_no_login_nodes_deregisters_every_target() -> None:
    drift = plan([], 22, [(Target("10.0.0.1", 22), "healthy"), (Target("10.0.0.2", 22), "unused")])

    assert drift.deregistered == [Target("10.0.0.1", 22), Target("10.0.0.2", 22)]


def test_target_group_arns_of_another_account_region_or_service_are_named_by_index() -> None:
    arns = [
        ARN,
        ARN.replace("us-east-1", "eu-west-1"),
        ARN.replace("123456789012", "210987654321"),
        ARN.replace("targetgroup", "loadbalancer/net"),
        ARN,
    ]

    problems = dict(check_target_group_arns(arns, account="123456789012", region="us-east-1"))

    assert sorted(problems) == [1, 2, 3, 4]
    assert "us-east-1" in problems[1]
    assert "not an ELBv2 target group ARN" in problems[3]
    assert "twice" in problems[4]
