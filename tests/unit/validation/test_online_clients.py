"""Where the ``--aws`` checks get their clients: autopilot_config imports nothing of the layer, so the
layer hands its own client factory over (``make_client``), and without one the checks make botocore
clients (the one SDK the CLI and the shared distribution have)."""

from __future__ import annotations

from typing import Any

from autopilot_config.validation import OnlineChecker


def test_clients_come_from_the_callers_factory_once_per_service() -> None:
    made: list[tuple[str, str | None]] = []

    def make_client(service: str, region: str | None) -> Any:
        made.append((service, region))
        return f"{service} client"

    checker = OnlineChecker(region="eu-west-1", make_client=make_client)

    assert (checker.ec2, checker.ec2, checker.iam) == ("ec2 client", "ec2 client", "iam client")
    assert made == [("ec2", "eu-west-1"), ("iam", "eu-west-1")]


def test_an_injected_client_wins_over_the_factory() -> None:
    checker = OnlineChecker(region="eu-west-1", s3="given", make_client=lambda *_: "made")

    assert (checker.s3, checker.fsx) == ("given", "made")


def test_without_factory_or_session_the_clients_are_botocores_in_the_region() -> None:
    checker = OnlineChecker(region="ap-southeast-2")

    assert type(checker.ec2).__module__ == "botocore.client"
    assert checker.ec2.meta.region_name == "ap-southeast-2"
    assert checker.fsx.meta.service_model.service_name == "fsx"
