"""Instance-hour list prices the Budgets simulator charges the simulated HyperPod fleet.

Approximate us-east-1 on-demand SageMaker prices (USD per instance-hour), rounded; good enough
for spend to grow at a realistic pace in scenarios, not a price quote. An instance type missing
here is a loud error (:class:`UnknownInstanceTypeError`) rather than a silent $0: a fleet that
costs nothing would hide exactly the budget alerts the sandbox exists to exercise. Scenarios that
need another type pass their own table (``BudgetsSimulator(prices={**DEFAULT_PRICES, ...})``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType

_PRICES: dict[str, str] = {
    # accelerated training (the HyperPod worker groups)
    "ml.p5.48xlarge": "98.32",
    "ml.p5e.48xlarge": "108.15",
    "ml.p5en.48xlarge": "112.50",
    "ml.p4d.24xlarge": "37.69",
    "ml.p4de.24xlarge": "47.11",
    "ml.trn1.32xlarge": "24.73",
    "ml.trn1n.32xlarge": "28.50",
    "ml.trn2.48xlarge": "46.00",
    "ml.g5.xlarge": "1.41",
    "ml.g5.2xlarge": "1.52",
    "ml.g5.4xlarge": "2.03",
    "ml.g5.8xlarge": "3.06",
    "ml.g5.12xlarge": "7.09",
    "ml.g5.16xlarge": "5.12",
    "ml.g5.24xlarge": "10.18",
    "ml.g5.48xlarge": "20.36",
    "ml.g6.xlarge": "1.01",
    "ml.g6.2xlarge": "1.22",
    "ml.g6.4xlarge": "1.65",
    "ml.g6.8xlarge": "2.51",
    "ml.g6.12xlarge": "5.87",
    "ml.g6.16xlarge": "4.23",
    "ml.g6.24xlarge": "8.48",
    "ml.g6.48xlarge": "16.95",
    # controller / login groups
    "ml.c5.large": "0.10",
    "ml.c5.xlarge": "0.20",
    "ml.c5.2xlarge": "0.41",
    "ml.c5.4xlarge": "0.82",
    "ml.c5.9xlarge": "1.84",
    "ml.c5.12xlarge": "2.45",
    "ml.c5.18xlarge": "3.67",
    "ml.c5.24xlarge": "4.90",
    "ml.m5.large": "0.12",
    "ml.m5.xlarge": "0.23",
    "ml.m5.2xlarge": "0.46",
    "ml.m5.4xlarge": "0.92",
    "ml.m5.8xlarge": "1.84",
    "ml.m5.12xlarge": "2.76",
    "ml.m5.16xlarge": "3.69",
    "ml.m5.24xlarge": "5.53",
    "ml.t3.medium": "0.05",
    "ml.t3.large": "0.10",
    "ml.t3.xlarge": "0.20",
    "ml.t3.2xlarge": "0.40",
}

DEFAULT_PRICES: Mapping[str, Decimal] = MappingProxyType({k: Decimal(v) for k, v in _PRICES.items()})
"""Instance type (``ml.<family>.<size>``) -> USD per instance-hour. Read-only."""


class UnknownInstanceTypeError(KeyError):
    """The fleet runs an instance type the price table does not know."""

    def __init__(self, instance_type: str) -> None:
        super().__init__(instance_type)
        self.instance_type = instance_type

    def __str__(self) -> str:
        return (
            f"no instance-hour price for {self.instance_type!r}: add it to "
            "sandbox/services/pricing/list_prices.py or pass prices={**DEFAULT_PRICES, ...} to the "
            "BudgetsSimulator"
        )


def price_per_hour(instance_type: str, prices: Mapping[str, Decimal] = DEFAULT_PRICES) -> Decimal:
    """USD per instance-hour of ``instance_type``; raises UnknownInstanceTypeError if unpriced."""
    try:
        return prices[instance_type]
    except KeyError:
        raise UnknownInstanceTypeError(instance_type) from None
