"""JSONata for moto's Step Functions executor, on the pure-Python ``jsonata-python``.

moto's executor (ported from LocalStack) evaluates every JSONata expression as one string: the
state's expression wrapped in declarations of what it references (``$states := {...};`` and every
workflow variable, ``$x := ...;``), handed to ``asl.jsonata.jsonata.eval_jsonata_expression``.
LocalStack plugs a JVM JSONata in there; moto leaves the hook ``_eval_jsonata`` at ``None``, so every
JSONata state and every JSONPath ``Assign`` fails with ``States.Runtime TypeError('NoneType' object
is not callable)``. ``install`` fills the hook and fixes what LocalStack's string building gets
wrong on its way:

- a string variable is declared as ``"<value>"`` without escaping, so a value with a quote, a
  backslash or a newline (an error ``Cause`` is JSON text) breaks every later expression: the seam
  declares strings as JSON literals;
- LocalStack declares the Step Functions functions as JSONata lambdas, ``$hash`` and ``$uuid`` as
  stubs that return "not supported": the seam drops those declarations and binds Python
  implementations of ``$partition``, ``$range``, ``$hash``, ``$random``, ``$uuid`` and ``$parse``
  (and disables ``$eval``, as AWS does);
- an expression that fails (a type error, a bad argument) escapes as a Python error, which moto
  reports as ``States.Runtime``; Step Functions fails the state with ``States.QueryEvaluationError``,
  and so does the seam (with an ``EvaluationFailed`` history event).

``$now()`` and ``$millis()`` read the sandbox clock, once per expression as JSONata specifies.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
import math
import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

import jsonata  # type: ignore[import-untyped]
from jsonata.functions import Functions  # type: ignore[import-untyped]
from jsonata.utils import Utils  # type: ignore[import-untyped]
from moto.stepfunctions.parser.api import EvaluationFailedEventDetails, HistoryEventType
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.common.string import string_expression
from moto.stepfunctions.parser.asl.component.intrinsic import jsonata as intrinsic_declarations
from moto.stepfunctions.parser.asl.eval import states, variable_store
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.jsonata import jsonata as moto_jsonata
from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

from sandbox.emulator.patching import Patches, SeamDrift

HASH_ALGORITHMS: Final = {
    "MD5": "md5",
    "SHA-1": "sha1",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
}


class JSONataError(RuntimeError):
    """An expression failed; Step Functions names the failure ``States.QueryEvaluationError``."""


# --------------------------------------------------------------------------------------------------
# the functions Step Functions adds to JSONata (AWS: "Transforming data with JSONata in Step Functions")
# --------------------------------------------------------------------------------------------------
def partition(array: Sequence[Any] | None, chunk_size: float | None = None) -> list[list[Any]] | None:
    """``$partition(array, chunkSize)``: consecutive chunks, the last one holding the remainder."""
    if not array or chunk_size is None or int(chunk_size) <= 0:
        return None  # undefined: the field that asked for it fails
    size = int(chunk_size)  # AWS rounds a fractional size towards zero
    items = list(array)
    return [items[start : start + size] for start in range(0, len(items), size)]


def number_range(first: float, last: float, step: float | None = None) -> list[int] | int | None:
    """``$range(first, last, step)``: from first to last inclusive; one value is a bare number."""
    if step is None or int(step) == 0:
        return None
    start, stop, stride = int(first), int(last), int(step)
    values = list(range(start, stop + (1 if stride > 0 else -1), stride))
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def hash_value(value: str, algorithm: str | None = None) -> str | None:
    """``$hash(value, algorithm)``: the hex digest; MD5, SHA-1, SHA-256, SHA-384 or SHA-512."""
    if algorithm is None:
        return None
    name = HASH_ALGORITHMS.get(algorithm)
    if name is None:
        raise JSONataError(
            f"$hash: unsupported algorithm {algorithm!r}, expected one of {list(HASH_ALGORITHMS)}"
        )
    return hashlib.new(name, str(value).encode()).hexdigest()


def random_number(seed: float | None = None) -> float:
    """``$random([seed])``: a number in [0, 1), the same for the same seed (not AWS's sequence)."""
    return random.Random(seed).random() if seed is not None else random.random()


def parse_json(text: str) -> Any:
    """``$parse(jsonString)``: the value the JSON text encodes (Step Functions' ``$eval`` replacement)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as error:
        raise JSONataError(f"$parse: not a JSON string: {error}") from error


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _eval_disabled(*_: Any) -> None:
    raise JSONataError("$eval is not available in Step Functions: use $parse")


_STEP_FUNCTIONS_FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "partition": partition,
    "range": number_range,
    "hash": hash_value,
    "random": random_number,
    "uuid": lambda: str(uuid.uuid4()),
    "parse": parse_json,
    "eval": _eval_disabled,
}


# --------------------------------------------------------------------------------------------------
# evaluation
# --------------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """jsonata-python's result as plain JSON values: its sequences as lists, whole floats as ints
    (JSONata numbers are doubles; Step Functions writes 10/2 as 5, not 5.0)."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, float) and value.is_integer() and math.isfinite(value) and abs(value) < 2**53:
        return int(value)
    return value


# moto hands the evaluator one string per expression: the state's expression in a block that first
# declares every value it may read, ``($states:={...the input...};$x:=...;<expression>)`` (and that
# block inside ``$exists(...)`` / ``$type(...)`` to check the result). Parsing the values' JSON as
# JSONata text made every evaluation a new parse (a tenth of a long simulation's time). The evaluator
# takes the leading declarations whose value is JSON as bindings of the block instead (the same
# scope: nothing in the block runs before them) and parses what is left once per distinct text.
_WRAPPERS: Final = ("(", "$exists((", "$type((")
_DECLARATION: Final = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*):=")
# JSON numbers are bound as the JSONata tokenizer reads a number literal: a double, whole ones as ints
# (a float 5.0 would print as "5.0" in $string and fail as a range bound, where JSONata has 5).


def _number(text: str) -> Any:
    return Utils.convert_number(float(text))


_JSON: Final = json.JSONDecoder(parse_int=_number, parse_float=_number, parse_constant=_not_json)


def split_declarations(expression: str) -> tuple[str, dict[str, Any]]:
    """``expression`` without its leading ``$name:=<JSON>;`` declarations, and their values."""
    prefix = next((w for w in _WRAPPERS if expression.startswith(w)), None)
    if prefix is None:
        return expression, {}
    bindings: dict[str, Any] = {}
    position = len(prefix)
    while (match := _DECLARATION.match(expression, position)) is not None:
        try:
            value, end = _JSON.raw_decode(expression, match.end())
        except ValueError:
            break
        if not expression.startswith(";", end) or match.group(1) in bindings:
            break
        bindings[match.group(1)] = _with_jsonata_nulls(value)
        position = end + 1
    return prefix + expression[position:], bindings


def _with_jsonata_nulls(value: Any) -> Any:
    """JSON null as jsonata-python's null (its ``None`` is JSONata's undefined)."""
    if value is None:
        return Utils.NULL_VALUE
    if isinstance(value, dict):
        return {key: _with_jsonata_nulls(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_jsonata_nulls(item) for item in value]
    return value


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Any:
    """The parsed expression (jsonata-python shares it between threads itself: one copy per thread
    with the same tree)."""
    return jsonata.Jsonata(text)


def make_evaluator(now: Callable[[], datetime]) -> Callable[[str], Any]:
    """The function moto's ``_eval_jsonata`` hook calls: expression text → JSON value (None for
    both JSONata null and undefined; moto tells them apart with ``$exists``)."""

    def evaluate(expression: str) -> Any:
        millis = int(now().timestamp() * 1000)
        try:
            text, bindings = split_declarations(expression)
            compiled = copy.copy(_parsed(text))  # the parse tree is shared, never changed by evaluation
            compiled.environment = compiled.create_frame(jsonata.Jsonata.static_frame)
            compiled.parser = jsonata.Jsonata.get_parser()  # this thread's (partial application parses)
            jsonata.Jsonata.CURRENT.jsonata = compiled  # what jsonata-python's __init__ does per thread
            for name, function in _STEP_FUNCTIONS_FUNCTIONS.items():
                compiled.register_lambda(name, function)
            # one timestamp per expression, from the sandbox clock
            compiled.register_function(
                "now",
                jsonata.Jsonata.JFunction(
                    jsonata.Jsonata.JLambda(
                        lambda picture=None, zone=None: Functions.datetime_from_millis(millis, picture, zone)
                    ),
                    "<s?s?:s>",
                ),
            )
            compiled.register_lambda("millis", lambda: millis)
            return _plain(compiled.evaluate(None, bindings or None))
        # What an expression can raise in jsonata-python (it lets ValueError / TypeError / arithmetic
        # errors through besides JException); anything else is a sandbox bug and must not reach the
        # workflow as a States.QueryEvaluationError a Catch could swallow.
        except (
            JSONataError,
            jsonata.JException,
            ValueError,
            TypeError,
            ArithmeticError,
            RecursionError,
        ) as error:
            raise moto_jsonata.JSONataException(
                getattr(error, "error", None) or type(error).__name__, str(error)
            ) from error

    return evaluate


def encode_variable_declarations(bindings: dict[str, Any]) -> str:
    """``$name:=<JSON>;`` for every binding (LocalStack's version leaves strings unescaped)."""
    return "".join(
        f"{reference}:={to_json_str(value, separators=(',', ':'))};" for reference, value in bindings.items()
    )


def _fail_on_query_error(original: Callable[[Any, Environment], None]) -> Callable[[Any, Environment], None]:
    def _eval_body(self: Any, env: Environment) -> None:
        try:
            original(self, env)
        except moto_jsonata.JSONataException as error:
            raise _query_evaluation_failure(env, str(self.expression), error) from error

    return _eval_body


def _query_evaluation_failure(
    env: Environment, expression: str, error: moto_jsonata.JSONataException
) -> FailureEventException:
    error_name = StatesErrorName(typ=StatesErrorNameType.StatesQueryEvaluationError)
    details = EvaluationFailedEventDetails(
        error=error_name.error_name,
        cause=f"The JSONata expression '{expression}' threw an error: {error.error}: {error.details}",
    )
    # moto's EventDetails is a total TypedDict that moto itself fills with one key
    event_details: Any = {"evaluationFailedEventDetails": details}
    failure = FailureEventException(
        FailureEvent(
            env=env,
            error_name=error_name,
            event_type=HistoryEventType.EvaluationFailed,
            event_details=event_details,
        )
    )
    # as moto's own undefined-result check does: the history shows the EvaluationFailed event
    env.event_manager.add_event(
        context=env.event_history_context,
        event_type=HistoryEventType.EvaluationFailed,
        event_details=cast(
            EventDetails, {"evaluationFailedEventDetails": failure.get_evaluation_failed_event_details()}
        ),
    )
    return failure


# --------------------------------------------------------------------------------------------------
# the seam
# --------------------------------------------------------------------------------------------------
def _check_shape() -> None:
    seam = "evaluate_stepfunctions_jsonata"
    if "_eval_jsonata" not in vars(moto_jsonata):
        raise SeamDrift(f"{seam}: {moto_jsonata.__name__}._eval_jsonata is gone")
    if "return _eval_jsonata(jsonata_expression)" not in inspect.getsource(
        moto_jsonata.eval_jsonata_expression
    ):
        raise SeamDrift(f"{seam}: eval_jsonata_expression no longer calls the _eval_jsonata hook")
    for module in (moto_jsonata, states, variable_store):
        if not callable(vars(module).get("encode_jsonata_variable_declarations")):
            raise SeamDrift(f"{seam}: {module.__name__}.encode_jsonata_variable_declarations is gone")
    if not isinstance(vars(intrinsic_declarations).get("_DECLARATION_BY_VARIABLE_REFERENCE"), dict):
        raise SeamDrift(
            f"{seam}: {intrinsic_declarations.__name__}._DECLARATION_BY_VARIABLE_REFERENCE is gone"
        )
    body = vars(string_expression.StringJSONata).get("_eval_body")
    if not callable(body) or list(inspect.signature(body).parameters) != ["self", "env"]:
        raise SeamDrift(f"{seam}: StringJSONata._eval_body(self, env) is gone")


def install(now: Callable[[], datetime]) -> Callable[[], None]:
    """Give moto's executor a JSONata evaluator (``$now()`` from ``now``); returns the undo."""
    _check_shape()
    patches = Patches()
    patches.replace(moto_jsonata, "_eval_jsonata", make_evaluator(now))
    for module in (moto_jsonata, states, variable_store):
        patches.replace(module, "encode_jsonata_variable_declarations", encode_variable_declarations)
    patches.replace(intrinsic_declarations, "_DECLARATION_BY_VARIABLE_REFERENCE", {})
    patches.replace(
        string_expression.StringJSONata,
        "_eval_body",
        _fail_on_query_error(string_expression.StringJSONata._eval_body),
    )
    return patches.undo
