"""The spend meter's items on moto's DynamoDB (the table as template.yaml defines it): figures written
only over older ones, one claim per alert threshold, the latest month, prices that expire."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from autopilot.dal.spend import SpendTable
from autopilot.models.spend import ListPrice, SpendMeter
from moto import mock_aws

from tests.samples.state_table import create_state_table

TABLE = "state"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def table() -> Iterator[SpendTable]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_state_table(client, TABLE)
        yield SpendTable(TABLE, dynamodb=client)


def meter(at: datetime, mtd: str, **changes: Any) -> SpendMeter:
    fields: dict[str, Any] = {
        "cluster_name": "ml",
        "month": at.strftime("%Y-%m"),
        "as_of": at,
        "hourly_rate_usd": Decimal("396.96"),
        "month_to_date_usd": Decimal(mtd),
        "forecast_usd": Decimal("90000.5"),
        "budget_usd": Decimal("2500.00"),
        "project": "llm",
    }
    return SpendMeter(**(fields | changes))


def test_figures_are_written_only_over_older_ones(table: SpendTable) -> None:
    assert table.put_meter(meter(NOW, "100.25"))
    assert not table.put_meter(meter(NOW, "999"))  # the same schedule time again: a retried run
    assert not table.put_meter(meter(NOW - timedelta(minutes=15), "999"))
    assert table.put_meter(meter(NOW + timedelta(minutes=15), "199.49", budget_usd=None, project=None))
    stored = table.get_meter("ml", "2026-11")
    assert stored is not None
    assert stored.month_to_date_usd == Decimal("199.49")
    assert stored.as_of == NOW + timedelta(minutes=15)
    assert (stored.budget_usd, stored.project) == (None, None)


def test_each_threshold_is_claimed_once_a_month_and_survives_later_figures(table: SpendTable) -> None:
    assert not table.claim_alert("ml", "2026-11", 80)  # nothing metered yet
    table.put_meter(meter(NOW, "1"))
    assert table.claim_alert("ml", "2026-11", 80)
    assert not table.claim_alert("ml", "2026-11", 80)
    assert table.claim_alert("ml", "2026-11", 100)
    table.release_alert("ml", "2026-11", 100)  # its publish failed: the next run tries again
    table.put_meter(meter(NOW + timedelta(minutes=15), "2"))
    stored = table.get_meter("ml", "2026-11")
    assert stored is not None
    assert stored.alerted == {80}
    assert table.claim_alert("ml", "2026-11", 100)


def test_the_latest_month_is_read(table: SpendTable) -> None:
    assert table.latest_meter("ml") is None
    table.put_meter(meter(NOW, "5"))
    table.put_meter(meter(datetime(2026, 12, 1, 0, 15, tzinfo=UTC), "1"))
    latest = table.latest_meter("ml")
    assert latest is not None
    assert latest.month == "2026-12"


def test_a_cached_price_expires(table: SpendTable) -> None:
    price = ListPrice(
        region="us-east-1", instance_type="ml.p5.48xlarge", usd_per_hour=Decimal("98.32"), fetched_at=NOW
    )
    table.put_price(price, expires_at=NOW + timedelta(days=1))
    assert table.get_price("us-east-1", "ml.p5.48xlarge", now=NOW + timedelta(hours=23)) == price
    assert table.get_price("us-east-1", "ml.p5.48xlarge", now=NOW + timedelta(days=1)) is None
    assert table.get_price("us-east-1", "ml.g5.xlarge", now=NOW) is None
