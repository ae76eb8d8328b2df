"""Schedule rules on the sandbox clock: the rate() / cron() expression parser (EventBridge's
syntax, the parts the stack uses) and the Scheduler that fires the stack's schedule rules as their
simulated times come.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from moto.events.models import events_backends

from sandbox.emulator import seams
from sandbox.emulator.clock import SandboxClock
from sandbox.emulator.deploy import ScheduleSpec, Stack

_RATE: Final = re.compile(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)")
_CRON: Final = re.compile(r"cron\((.+)\)")
_UNIT_SECONDS: Final = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS: Final = {
    m: i + 1
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_DAYS: Final = {d: i + 1 for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_MAX_FIRES_PER_TICK: Final = 20


@dataclass
class _Cron:
    minutes: set[int] | None
    hours: set[int] | None
    days: set[int] | None
    months: set[int] | None
    weekdays: set[int] | None  # 1 = Sunday, as EventBridge counts
    years: set[int] | None

    def matches(self, when: datetime) -> bool:
        weekday = (when.isoweekday() % 7) + 1
        checks = (
            (self.minutes, when.minute),
            (self.hours, when.hour),
            (self.days, when.day),
            (self.months, when.month),
            (self.weekdays, weekday),
            (self.years, when.year),
        )
        return all(allowed is None or value in allowed for allowed, value in checks)


def _cron_field(text: str, low: int, high: int, names: Mapping[str, int], expression: str) -> set[int] | None:
    if text in ("*", "?"):
        return None
    values: set[int] = set()
    for part in text.upper().split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = names.get(first) or int(first), names.get(last) or int(last)
        elif base in names or base.isdigit():
            start = names.get(base) or int(base)
            end = high if step_text else start
        else:
            raise ValueError(f"{expression}: cron field {text!r} is not supported by the sandbox scheduler")
        values.update(range(start, end + 1, step))
    return values


def parse_schedule(expression: str) -> timedelta | _Cron:
    """rate(N unit) → the period; cron(m h dom mon dow year) → a matcher. Loud on what it cannot do."""
    rate = _RATE.fullmatch(expression.strip())
    if rate:
        return timedelta(seconds=int(rate.group(1)) * _UNIT_SECONDS[rate.group(2).rstrip("s")])
    cron = _CRON.fullmatch(expression.strip())
    if cron:
        fields = cron.group(1).split()
        if len(fields) != 6:
            raise ValueError(f"{expression}: cron needs 6 fields")
        return _Cron(
            _cron_field(fields[0], 0, 59, {}, expression),
            _cron_field(fields[1], 0, 23, {}, expression),
            _cron_field(fields[2], 1, 31, {}, expression),
            _cron_field(fields[3], 1, 12, _MONTHS, expression),
            _cron_field(fields[4], 1, 7, _DAYS, expression),
            _cron_field(fields[5], 1970, 2199, {}, expression),
        )
    raise ValueError(f"schedule expression {expression!r} is not supported by the sandbox scheduler")


class Scheduler:
    """Fires the stack's schedule rules on the sandbox clock (their targets get a Scheduled Event)."""

    def __init__(self, stack: Stack, clock: SandboxClock, region: str, account_id: str) -> None:
        self.stack = stack
        self.clock = clock
        self.region = region
        self.account_id = account_id
        self.fired: dict[str, int] = {}
        self._lock = threading.Lock()
        start = clock.now()
        self._plans: dict[str, tuple[ScheduleSpec, timedelta | _Cron]] = {
            lid: (spec, parse_schedule(spec.expression)) for lid, spec in stack.schedules.items()
        }
        self._next: dict[str, datetime] = {}
        for lid, (_, plan) in self._plans.items():
            self._next[lid] = start + plan if isinstance(plan, timedelta) else _next_minute(start)

    def fire_due(self) -> None:
        now = self.clock.now()
        with self._lock:
            for lid, (_, plan) in self._plans.items():
                fires = 0
                while self._next[lid] <= now and fires < _MAX_FIRES_PER_TICK:
                    due = self._next[lid]
                    if isinstance(plan, timedelta):
                        self._fire(lid, due)
                        self._next[lid] = due + plan
                    else:
                        if plan.matches(due):
                            self._fire(lid, due)
                        self._next[lid] = due + timedelta(minutes=1)
                    fires += 1
                if self._next[lid] <= now:  # far behind (a big advance): skip to now, as a missed schedule
                    self._next[lid] = now + plan if isinstance(plan, timedelta) else _next_minute(now)

    def next_due(self) -> datetime | None:
        """When the next schedule is due (a cron's next minute, whether it matches or not)."""
        with self._lock:
            return min(self._next.values(), default=None)

    def fire(self, logical_id: str, when: datetime | None = None) -> None:
        if logical_id not in self._plans:
            raise KeyError(f"{logical_id} is not a schedule of stack {self.stack.name}")
        self._fire(logical_id, when or self.clock.now())

    def _fire(self, logical_id: str, when: datetime) -> None:
        spec, _ = self._plans[logical_id]
        bus = events_backends[self.account_id][self.region].describe_event_bus(spec.event_bus)
        rule = bus.rules.get(spec.rule_name)
        if rule is None or rule.state != "ENABLED":
            return
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": self.account_id,
            "time": when.timestamp(),
            "region": self.region,
            "resources": [spec.rule_arn],
            "detail": {},
        }
        seams.deliver_to_rule_targets(rule, event)
        self.fired[logical_id] = self.fired.get(logical_id, 0) + 1


def _next_minute(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0) + timedelta(minutes=1)
