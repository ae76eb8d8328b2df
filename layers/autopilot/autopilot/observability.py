"""The one place where logger, tracer and metrics are created; everything else imports them.

The tracer imports the X-Ray SDK only when tracing is on. Powertools' Tracer builds the X-Ray
recorder at construction even when it then disables it, and importing ``aws_xray_sdk.core`` costs
~0.28 s of cold start. Tracing is off where Powertools itself turns it off (POWERTOOLS_TRACE_DISABLED,
outside Lambda, ``sam local``, the sandbox, tests); there the tracer gets a provider that records
nothing, which is what the disabled X-Ray recorder would do. In Lambda with ``Tracing: Active`` it is
on, and the function pays the X-Ray import at init as before, for the handler subsegment and the
patched boto3 calls (docs/operations.md, "Cold start").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from enum import StrEnum
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment


class _UntracedSegment(BaseSegment):
    def close(self, end_time: int | None = None) -> None:
        pass

    def add_subsegment(self, subsegment: Any) -> None:
        pass

    def remove_subsegment(self, subsegment: Any) -> None:
        pass

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        pass


class UntracedProvider(BaseProvider):
    """The provider a disabled tracer gets: records nothing and needs no X-Ray SDK."""

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[BaseSegment]:
        yield _UntracedSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AsyncIterator[BaseSegment]:
        yield _UntracedSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        pass

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        pass

    def patch(self, modules: Sequence[str]) -> None:
        pass

    def patch_all(self) -> None:
        pass


def build_tracer() -> Tracer:
    """An X-Ray tracer when tracing is on, else one that never imports the X-Ray SDK.

    The on/off rule is Powertools' own (``Tracer._is_tracer_disabled``), so this decides exactly
    as a plain ``Tracer()`` would; tests/unit/test_observability.py holds it to that.
    """
    if Tracer._is_tracer_disabled():
        return Tracer(disabled=True, provider=UntracedProvider())
    return Tracer()


logger = Logger()
tracer = build_tracer()
metrics = Metrics()


class Count(StrEnum):
    """Every count Autopilot emits: namespace POWERTOOLS_METRICS_NAMESPACE, dimension ``service``
    (Powertools' default), unit Count; the dashboard and alarms in template.yaml read these names
    (docs/operations.md, "Metrics and alarms")."""

    CLUSTER_EVENTS_HANDLED = "ClusterEventsHandled"
    BREAKERS_TRIPPED = "BreakersTripped"
    SESSIONS_TERMINATED = "SessionsTerminated"
    CLUSTER_TAGS_REPAIRED = "ClusterTagsRepaired"
    BUDGET_ALERTS_FIRED = "BudgetAlertsFired"


def count(name: Count, value: int = 1) -> None:
    """Add to a count of this invocation; the handler's ``@metrics.log_metrics`` writes it (EMF in the
    function's log, no PutMetricData call). A zero is written too, so a quiet period shows as 0."""
    metrics.add_metric(name=name.value, unit=MetricUnit.Count, value=value)
