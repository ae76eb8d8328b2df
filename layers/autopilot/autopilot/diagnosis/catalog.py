"""The catalog of failure causes (catalog.json beside this module), loaded once and validated.

Data, not code: an entry is its category, a one-line summary, the fix, the regexes that recognise it
and the public lines it was built from. Adding a cause is adding an entry to catalog.json.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

CATALOG_FILE = Path(__file__).with_name("catalog.json")
UNKNOWN = "unknown"


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    line: str
    source: str  # where the line was published (a URL, or "unconfirmed: …" with why)


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    category: str
    summary: str
    fix: str
    patterns: tuple[str, ...]
    examples: tuple[Example, ...]

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            re.compile(pattern)  # a bad regex fails loading, not a diagnosis in the middle of a failure
        return patterns

    def matches(self, text: str) -> bool:
        return any(_compiled(pattern).search(text) for pattern in self.patterns)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@cache
def catalog() -> tuple[Entry, ...]:
    """The entries in file order: when one line matches several, the first entry names it."""
    document = json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    entries = tuple(Entry.model_validate(entry) for entry in document["entries"])
    categories = [entry.category for entry in entries]
    if len(set(categories)) != len(categories) or UNKNOWN in categories:
        raise ValueError(f"catalog categories must be unique and not {UNKNOWN!r}: {categories}")
    return entries


def first_match(text: str, entries: tuple[Entry, ...] | None = None) -> Entry | None:
    return next((entry for entry in entries or catalog() if entry.matches(text)), None)
