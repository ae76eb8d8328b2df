"""The simulators a Sandbox installs are an explicit, typed list (sandbox/harness/simulators.py): each is
installed, undone in reverse, and a sandbox without them says so instead of handing out None."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.sqs import MessageMoves
from sandbox.harness.core import Sandbox
from sandbox.harness.simulators import Simulators, install_simulators
from sandbox.services.budgets import BudgetsSimulator
from sandbox.services.hyperpod import HyperPodSimulator
from sandbox.services.pricing.price_list_api import PricingSimulator
from sandbox.services.ssm_sessions import SsmSessionsSimulator

NO_RETRIES = Config(retries={"max_attempts": 1})
TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def test_install_simulators_installs_each_one_and_undo_removes_them(hyperpod_aws_env: None) -> None:
    undo: list[Callable[[], None]] = []
    with mock_aws():
        simulators = install_simulators(
            SandboxClock(speed=0),
            region="us-east-1",
            account_id="123456789012",
            seed=1,
            duplicate_events=0.0,
            repair_action_none=0.0,
            undo=undo,
        )
        assert [(f.name, type(getattr(simulators, f.name))) for f in fields(Simulators)] == [
            ("hyperpod", HyperPodSimulator),
            ("ssm", SsmSessionsSimulator),
            ("budgets", BudgetsSimulator),
            ("message_moves", MessageMoves),
            ("pricing", PricingSimulator),
        ]
        # the five simulators and the two moto seams beside them (IAM's simulator, S3's bucket owner)
        assert len(undo) == 7
        assert simulators.ticking() == [simulators.hyperpod, simulators.ssm, simulators.budgets]
        assert HyperPodSimulator.every_region() == [simulators.hyperpod]
        pricing = boto3.client("pricing", region_name="us-east-1", config=NO_RETRIES)
        assert pricing.get_products(ServiceCode="AmazonSageMaker", MaxResults=1)["PriceList"]
        while undo:
            undo.pop()()
        assert HyperPodSimulator.every_region() == []
        with pytest.raises(ClientError):  # moto's own answer again: it has no pricing service
            pricing.get_products(ServiceCode="AmazonSageMaker", MaxResults=1)


def test_a_sandbox_without_simulators_refuses_to_hand_one_out() -> None:
    with Sandbox(TEMPLATE, simulators=False, background=False, seed=2) as sandbox:
        assert sandbox.simulators is None
        assert sandbox.hyperpods() == []
        sandbox.tick()  # nothing to tick: no error
        with pytest.raises(RuntimeError, match="simulators=False"):
            _ = sandbox.hyperpod
        with pytest.raises(RuntimeError, match="simulators=False"):
            sandbox.apply_fault("node_unhealthy", {})
