"""List prices of HyperPod instances from the AWS Price List Query API (``pricing:GetProducts``).

The API is served in us-east-1, ap-south-1 and eu-central-1 only; elsewhere botocore's endpoint
(``api.pricing.<region>.amazonaws.com``) does not exist, so the client is made for the nearest of
the three (:func:`price_list_endpoint_region`) and asks for the stack region's prices (``regionCode``).

A price is looked up once per instance type and region, then cached twice: in the execution
environment's memory (a warm invocation asks nobody) and in the state table with a TTL (a cold start
does not refetch every type); both expire after ``ttl`` (one day: list prices change rarely).

Which product is HyperPod's: the SageMaker price list holds several products per instance type
(training, hosting, notebooks ...); HyperPod compute bills under the usage type
``<region prefix>-Cluster:<instance type>``, so the product whose ``usagetype`` ends in
``Cluster:<instance type>`` is taken (the prefix is left out: it differs by region).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final

from autopilot import aws
from autopilot.models.spend import ListPrice

if TYPE_CHECKING:
    from autopilot.dal.spend import SpendStore

# No mypy-boto3 stubs for the pricing client are installed (requirements/dev.lock): typed as Any.
PricingClient = Any

SERVICE_CODE: Final = "AmazonSageMaker"
PRICE_LIST_REGIONS: Final = ("us-east-1", "ap-south-1", "eu-central-1")
DEFAULT_TTL: Final = timedelta(days=1)

# (region, instance type) -> (price, expires at): kept for the life of the execution environment.
_memory: dict[tuple[str, str], tuple[ListPrice, datetime]] = {}


def clear_memory() -> None:
    """Forget the in-memory prices (tests; a new execution environment starts empty)."""
    _memory.clear()


def price_list_endpoint_region(region: str) -> str:
    """The Price List endpoint nearest to ``region`` (any of the three answers for every region)."""
    if region in PRICE_LIST_REGIONS:
        return region
    if region.startswith("ap-"):
        return "ap-south-1"
    if region.startswith(("eu-", "me-", "af-", "il-")):
        return "eu-central-1"
    return "us-east-1"


def hyperpod_price(price_list: Iterable[str], instance_type: str) -> Decimal | None:
    """The on-demand USD price per hour of HyperPod usage of ``instance_type`` in GetProducts'
    ``PriceList`` (JSON strings), or None when none of its products is HyperPod's."""
    suffix = f"Cluster:{instance_type}"
    for entry in price_list:
        product: dict[str, Any] = json.loads(entry)
        attributes = product.get("product", {}).get("attributes", {})
        if not str(attributes.get("usagetype", "")).endswith(suffix):
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if dimension.get("unit") == "Hrs" and usd is not None:
                    try:
                        return Decimal(str(usd))
                    except InvalidOperation:
                        continue
    return None


class ListPrices:
    """HyperPod list prices for one region, cached in memory and in the state table."""

    def __init__(
        self,
        region: str,
        store: SpendStore,
        *,
        pricing: PricingClient | None = None,
        ttl: timedelta = DEFAULT_TTL,
    ) -> None:
        self.region = region
        self._store = store
        self._pricing = pricing
        self._ttl = ttl

    @property
    def pricing(self) -> PricingClient:
        if self._pricing is None:
            self._pricing = aws.client("pricing", price_list_endpoint_region(self.region))
        return self._pricing

    def price(self, instance_type: str, *, now: datetime) -> Decimal | None:
        """USD per hour of ``instance_type`` in the region; None if the Price List has no HyperPod price."""
        key = (self.region, instance_type)
        held = _memory.get(key)
        if held is not None and held[1] > now:
            return held[0].usd_per_hour
        cached = self._store.get_price(self.region, instance_type, now=now)
        if cached is not None:
            _memory[key] = (cached, cached.fetched_at + self._ttl)
            return cached.usd_per_hour
        usd = self._fetch(instance_type)
        if usd is None:
            return None
        fetched = ListPrice(region=self.region, instance_type=instance_type, usd_per_hour=usd, fetched_at=now)
        self._store.put_price(fetched, expires_at=now + self._ttl)
        _memory[key] = (fetched, now + self._ttl)
        return usd

    def _fetch(self, instance_type: str) -> Decimal | None:
        pages = self.pricing.get_paginator("get_products").paginate(
            ServiceCode=SERVICE_CODE,
            Filters=[
                {"Type": "TERM_MATCH", "Field": "regionCode", "Value": self.region},
                {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type},
            ],
        )
        for page in pages:
            found = hyperpod_price(page.get("PriceList", []), instance_type)
            if found is not None:
                return found
        return None
