"""What a command prints: its result on stdout in one of three forms, everything else on stderr.

``--output json`` prints one JSON document on stdout, the result or ``{"error": {...}}``, so a pipe
into a JSON parser always has something to parse; ``text`` prints tab-separated values for ``cut`` and
``while read``; ``table`` (the default) prints the view a person reads. ``--query`` (JMESPath) selects
from the result first, in every form, as the AWS CLI does. Progress and warnings go to stderr only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import jmespath  # type: ignore[import-untyped]  # (no stubs in the lock)

OUTPUTS = ("table", "json", "text")
DEFAULT_OUTPUT = "table"

# A command's own view of its (unqueried) result for --output table.
TableView = Callable[[Any, TextIO], None]


class QueryError(ValueError):
    """The --query expression is not JMESPath."""


# jmespath.parser.ParsedResult: ``.search(document)``
Query = Any


def compile_query(expression: str | None) -> Query | None:
    if expression is None:
        return None
    try:
        return jmespath.compile(expression)
    except jmespath.exceptions.JMESPathError as exc:
        raise QueryError(f"--query is not a JMESPath expression: {exc}") from exc


class Output:
    def __init__(self, mode: str, query: Query | None, out: TextIO, err: TextIO) -> None:
        self.mode = mode
        self._query = query
        self.out = out
        self.err = err

    @property
    def json(self) -> bool:
        return self.mode == "json"

    def result(self, document: Any, view: TableView | None = None) -> None:
        if self._query is not None:
            document = self._query.search(document)
        if self.mode == "json":
            print_json(document, self.out)
        elif self.mode == "text":
            for line in text_lines(document):
                print(line, file=self.out)
        elif view is not None and self._query is None:
            view(document, self.out)
        else:
            print_generic(document, self.out)

    def error(self, code: str, message: str, lines: Sequence[str] = (), **detail: Any) -> None:
        """``{"error": {"code", "message", ...}}`` on stdout in JSON mode; else lines on stderr."""
        if self.json:
            shown = {key: value for key, value in detail.items() if value is not None}
            print_json({"error": {"code": code, "message": message, **shown}}, self.out)
            return
        print(f"error: {message}", file=self.err)
        for line in lines:
            print(f"  {line}", file=self.err)

    def progress(self, line: str) -> None:
        print(line, file=self.err)
        self.err.flush()


def print_json(value: Any, out: TextIO) -> None:
    print(json.dumps(value, indent=2, sort_keys=True), file=out)


def _scalar(value: Any) -> bool:
    return not isinstance(value, dict | list)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    return json.dumps(value) if isinstance(value, bool) else str(value)


def text_lines(value: Any) -> list[str]:
    """Tab-separated values: an object's scalars (by key) on one line, then its nested values; a list
    of scalars on one line; a list of objects one line per object."""
    if _scalar(value):
        return [] if value is None else [cell(value)]
    if isinstance(value, list):
        if all(_scalar(item) for item in value):
            return ["\t".join(cell(item) for item in value)] if value else []
        return [line for item in value for line in text_lines(item)]
    keys = sorted(value)
    scalars = [cell(value[key]) for key in keys if _scalar(value[key])]
    lines = ["\t".join(scalars)] if scalars else []
    return lines + [line for key in keys if not _scalar(value[key]) for line in text_lines(value[key])]


def print_table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out
        )


def print_fields(fields: Sequence[tuple[str, Any]], out: TextIO) -> None:
    """``label   value`` lines, skipping absent values."""
    if not fields:
        return
    width = max(len(label) for label, _ in fields) + 2
    for label, value in fields:
        if value is not None and value != "":
            print(f"{label:<{width}}{cell(value)}", file=out)


def print_generic(value: Any, out: TextIO) -> None:
    """A table of whatever --query selected: objects as rows under their keys, an object as fields."""
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        columns = list(dict.fromkeys(key for item in value for key in item if _scalar(item[key])))
        if columns:
            rows = [[column.upper() for column in columns]]
            rows += [[cell(item.get(column)) for column in columns] for item in value]
            print_table(rows, out)
            return
    if isinstance(value, dict):
        print_fields([(key, item if _scalar(item) else json.dumps(item)) for key, item in value.items()], out)
        return
    for line in text_lines(value):
        print(line.replace("\t", "  "), file=out)
