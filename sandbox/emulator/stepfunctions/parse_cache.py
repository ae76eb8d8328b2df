"""Parse a state machine's ASL once per definition, not at every StartExecution.

moto's executor (``ExecutionWorker._get_evaluation_entrypoint``) calls
``AmazonStateLanguageParser.parse(definition)`` for every execution, and CreateStateMachine /
UpdateStateMachine call it to validate. ``parse`` is two steps: ANTLR lexes and parses the JSON into a
parse tree (~160 ms for statemachines/replace_node.asl.json, ~65 ms for the other two), then
moto's ``Preprocessor`` visits the tree and builds the evaluation components (16-53 ms).

Only the parse tree is cached, keyed by the definition string (an updated definition is another
key, so it is parsed anew). The components are built again for every execution, because they are not
safe to share: ``EvalComponent.heap_key`` is drawn lazily on first use without a lock, and a
Retry's attempt counter lives in the execution's heap under that key, so two executions touching one
fresh retrier at once could each count under a different key. A parse tree is read-only once built
(the Preprocessor only reads contexts and tokens), so one tree serves any number of executions and
threads. A definition with syntax errors is not cached: it raises ``ASLParserException`` as moto does.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from antlr4 import CommonTokenStream, InputStream, ParserRuleContext  # type: ignore[import-untyped]
from moto.stepfunctions.parser.asl.antlr.runtime.ASLLexer import ASLLexer
from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser
from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
from moto.stepfunctions.parser.asl.parse.asl_parser import (
    AmazonStateLanguageParser,
    ASLParserException,
    SyntaxErrorListener,
)
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

from sandbox.emulator.patching import Patches, SeamDrift

# Definitions a sandbox holds at once: three state machines and their updated revisions.
_CAPACITY: Final = 64


@dataclass
class ParseStats:
    """Parses served from the cache (``hits``) and done by ANTLR (``misses``) since install."""

    hits: int = 0
    misses: int = 0


_trees: Final[OrderedDict[str, ParserRuleContext]] = OrderedDict()
_lock: Final = threading.Lock()
_stats: Final = ParseStats()


def stats() -> ParseStats:
    with _lock:
        return ParseStats(hits=_stats.hits, misses=_stats.misses)


def _parse_tree(definition: str) -> ParserRuleContext:
    # moto's own steps (AmazonStateLanguageParser.parse), up to the tree
    listener = SyntaxErrorListener()  # type: ignore[no-untyped-call]
    parser = ASLParser(CommonTokenStream(ASLLexer(InputStream(definition))))
    parser.removeErrorListeners()
    parser.addErrorListener(listener)
    tree: ParserRuleContext = parser.state_machine()  # type: ignore[no-untyped-call]
    if listener.errors:
        raise ASLParserException(errors=listener.errors)
    return tree


def _tree(definition: str) -> ParserRuleContext:
    with _lock:
        tree = _trees.get(definition)
        if tree is not None:
            _trees.move_to_end(definition)
            _stats.hits += 1
            return tree
    # parsed outside the lock: two executions of a new definition may both parse it, harmlessly
    tree = _parse_tree(definition)
    with _lock:
        _stats.misses += 1
        _trees[definition] = tree
        _trees.move_to_end(definition)
        while len(_trees) > _CAPACITY:
            _trees.popitem(last=False)
    return tree


def parse(definition: str) -> tuple[EvalComponent, ParserRuleContext]:
    """``AmazonStateLanguageParser.parse`` with the parse tree cached; fresh components every call."""
    tree = _tree(definition)
    program: EvalComponent = Preprocessor().visit(tree)
    return program, tree


def _reset_stats() -> None:
    with _lock:
        _stats.hits = _stats.misses = 0


def clear() -> None:
    """Forget every cached tree and zero the counters (tests that count parses start here)."""
    with _lock:
        _trees.clear()
    _reset_stats()


def install() -> Callable[[], None]:
    """Serve parses from the cache until the undo. The counters start at zero at each install; the
    trees are kept across installs (read-only, keyed by the whole definition text), so a process that
    deploys the same template again (a test suite: one deploy per test) parses each ASL file once."""
    seam = "cache_stepfunctions_parse_trees"
    original = vars(AmazonStateLanguageParser).get("parse")
    if not isinstance(original, staticmethod):
        raise SeamDrift(f"{seam}: AmazonStateLanguageParser.parse is no longer a staticmethod")
    if list(inspect.signature(original.__func__).parameters) != ["definition"]:
        raise SeamDrift(f"{seam}: AmazonStateLanguageParser.parse no longer takes (definition)")
    source = inspect.getsource(original.__func__)
    if "parser.state_machine()" not in source or "Preprocessor()" not in source:
        raise SeamDrift(f"{seam}: AmazonStateLanguageParser.parse no longer parses then preprocesses")

    _reset_stats()
    patches = Patches()
    patches.replace(AmazonStateLanguageParser, "parse", staticmethod(parse))

    def undo() -> None:
        patches.undo()
        _reset_stats()

    return undo
