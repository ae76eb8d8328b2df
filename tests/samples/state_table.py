"""The state table as template.yaml declares it (keys, indexes, billing), created in moto by the unit
and integration tests that exercise the data layer."""

from __future__ import annotations

from typing import Any

from sandbox.emulator.deploy import load_template
from tests.samples import ROOT

STATE_TABLE = load_template(ROOT / "template.yaml")["Resources"]["StateTable"]["Properties"]


def create_state_table(client: Any, name: str = "state") -> None:
    """Create the template's state table named ``name`` with ``client`` (a moto DynamoDB client)."""
    client.create_table(
        TableName=name,
        BillingMode=STATE_TABLE["BillingMode"],
        AttributeDefinitions=STATE_TABLE["AttributeDefinitions"],
        KeySchema=STATE_TABLE["KeySchema"],
        GlobalSecondaryIndexes=STATE_TABLE["GlobalSecondaryIndexes"],
    )
