"""Request bodies before validation: media type, size, UTF-8 and JSON the rest of the stack can hold.

Python's ``json`` turns a 10,000-deep array into a RecursionError, a 5,000-digit integer into a
ValueError (the interpreter's int-from-string limit) and ``\\ud800`` into a string no AWS call can
encode; each of those would otherwise surface as a 500. The limits are far above anything a
CreateCluster request needs (it nests about 8 deep; AWS's longest integers are 64-bit).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

MAX_BODY_BYTES: Final = 1024 * 1024
MAX_DEPTH: Final = 64
MAX_NUMBER_CHARS: Final = 64
JSON_MEDIA_TYPE: Final = "application/json"


class InvalidBodyError(ValueError):
    """The body is not UTF-8 JSON within the limits (400)."""


class BodyTooLargeError(ValueError):
    """The body is over MAX_BODY_BYTES (413)."""


class UnsupportedMediaTypeError(ValueError):
    """The body is not ``application/json`` (415)."""

    def __init__(self, content_type: str) -> None:
        super().__init__(content_type)
        self.content_type = content_type


def unsupported_media_type(event: BaseProxyEvent) -> str | None:
    """The request's Content-Type when it carries a body that is not UTF-8 JSON, else None.

    A body without a Content-Type is read as JSON, as API Gateway does (its default media type).
    """
    if not event.body:
        return None
    content_type = event.headers.get("content-type")
    if content_type is None:
        return None
    media_type, *parameters = (part.strip() for part in content_type.split(";"))
    if media_type.lower() != JSON_MEDIA_TYPE:
        return content_type
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return content_type
    return None


def body_is_utf8(event: BaseProxyEvent) -> bool:
    """Whether the body decodes as UTF-8 (a binary body arrives base64-encoded)."""
    try:
        _ = event.decoded_body
    except UnicodeError:
        return False
    return True


def parse_json(text: str) -> Any:
    """The body as JSON (Powertools' ``json_body_deserializer``), or InvalidBodyError/BodyTooLargeError."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate in the event's body string
        raise InvalidBodyError("the body is not valid UTF-8") from None
    if size > MAX_BODY_BYTES:
        raise BodyTooLargeError(f"the body is {size} bytes; at most {MAX_BODY_BYTES} are accepted")
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_finite_float, parse_constant=_no_constant)
    except RecursionError:
        raise InvalidBodyError(f"the body nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise InvalidBodyError(f"the body is not valid JSON: {exc.msg} at character {exc.pos}") from None
    _check_tree(value)
    return value


def _number_text(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise InvalidBodyError(
            f"the body has a number of {len(text)} characters; at most {MAX_NUMBER_CHARS} are accepted"
        )
    return text


def _integer(text: str) -> int:
    return int(_number_text(text))


def _finite_float(text: str) -> float:
    value = float(_number_text(text))
    if not math.isfinite(value):
        raise InvalidBodyError(f"the body has a number out of range: {text}")
    return value


def _no_constant(name: str) -> Any:
    raise InvalidBodyError(f"the body is not valid JSON: {name} is not a JSON value")


def _check_tree(value: Any) -> None:
    """Depth and strings, iteratively (the point is not to recurse on untrusted input)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, str):
            _check_text(node)
            continue
        if not isinstance(node, Mapping | list):
            continue
        if depth > MAX_DEPTH:
            raise InvalidBodyError(f"the body nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, Mapping):
            for key, child in node.items():
                _check_text(key)
                pending.append((child, depth + 1))
        else:
            pending.extend((child, depth + 1) for child in node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # "\ud800": valid JSON escape, not a character
        raise InvalidBodyError("the body has a string that is not valid Unicode (a lone surrogate)") from None
