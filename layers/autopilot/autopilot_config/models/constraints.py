"""Constrained scalar types that read like the botocore service model and fail with human messages.

Each constraint is an ``Annotated`` marker holding the botocore values verbatim (length bounds,
pattern, range), so a test can compare the models against botocore's shapes and fail on drift.
Patterns are matched in full with Python's ``re``: botocore's patterns are implicitly anchored,
and some of them use look-arounds that pydantic's default (Rust) regex engine rejects.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

# Several botocore shapes share this name pattern (cluster, instance group, partition names). Here, not
# in cluster_config, so that the state table checks a cluster's name without building the
# CreateCluster models (a cold-start cost of every function).
NAME_PATTERN = "[a-zA-Z0-9](-*[a-zA-Z0-9])*"


@dataclass(frozen=True)
class Text:
    """A string with botocore's ``min``/``max`` length and ``pattern``.

    ``hint`` is what a user reads when the pattern does not match. ``matcher`` replaces the regex
    for the few botocore patterns Python's ``re`` cannot express (Unicode classes like ``\\p{L}``).
    """

    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None
    hint: str | None = None
    matcher: Callable[[str], bool] | None = field(default=None, compare=False)

    @cached_property
    def _fullmatch(self) -> Callable[[str], bool] | None:
        if self.matcher is not None:
            return self.matcher
        if self.pattern is None:
            return None
        compiled = re.compile(self.pattern)
        return lambda value: compiled.fullmatch(value) is not None

    def check(self, value: str) -> str:
        if not value and self.min_length:
            raise PydanticCustomError("text_empty", "must not be empty")
        # The pattern's hint says what the value should look like, which helps more than a length.
        matches = self._fullmatch
        if matches is not None and not matches(value):
            if self.hint:
                raise PydanticCustomError("text_pattern", self.hint)
            raise PydanticCustomError(
                "text_pattern", "must match the pattern {pattern}", {"pattern": self.pattern}
            )
        if len(value) < self.min_length:
            raise PydanticCustomError(
                "text_too_short", "must be at least {min} characters long", {"min": self.min_length}
            )
        if self.max_length is not None and len(value) > self.max_length:
            raise PydanticCustomError(
                "text_too_long",
                "must be at most {max} characters long (is {actual})",
                {"max": self.max_length, "actual": len(value)},
            )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, core_schema.str_schema(strict=True))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        if self.min_length:
            json_schema["minLength"] = self.min_length
        if self.max_length is not None:
            json_schema["maxLength"] = self.max_length
        if self.pattern is not None:
            json_schema["pattern"] = f"^(?:{self.pattern})$"
        return json_schema


@dataclass(frozen=True)
class IntRange:
    """An integer within botocore's ``min``/``max`` (either may be absent)."""

    min: int | None = None
    max: int | None = None

    def message(self) -> str:
        if self.min is not None and self.max is not None:
            if self.max == self.min + 1:
                return f"must be {self.min} or {self.max}"
            return f"must be between {self.min} and {self.max}"
        if self.min is not None:
            return f"must be at least {self.min}"
        return f"must be at most {self.max}"

    def check(self, value: int) -> int:
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise PydanticCustomError("int_range", self.message())
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, core_schema.int_schema(strict=True))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        if self.min is not None:
            json_schema["minimum"] = self.min
        if self.max is not None:
            json_schema["maximum"] = self.max
        return json_schema


_TAG_PUNCTUATION = frozenset("_.:/=+-@")


def is_tag_text(value: str) -> bool:
    """botocore's tag pattern ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*``: letters, separators, numbers, _.:/=+-@."""
    return all(char in _TAG_PUNCTUATION or unicodedata.category(char)[0] in "LZN" for char in value)
