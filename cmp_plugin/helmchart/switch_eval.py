"""Whether a gate's key decides its resources: a small evaluator of Go template conditions.

A key with a truthy default that only appears beside another true key in an ``or`` decides
nothing: turning it off leaves the resources. Paths, literals, parentheses, pipelines, ``and``,
``or``, ``not``, ``empty`` and ``default`` are evaluated over the effective values with the key
turned off; anything else is unknown, and unknown counts as deciding.
"""

from __future__ import annotations

import re
from typing import Any

from cmp_plugin.helmchart import template_lexer
from cmp_plugin.helmchart.switches import Gate

__all__ = ["evaluate", "still_renders"]

_UNKNOWN = object()


class _Flipped:
    """The key under test, turned off: false to and/or/not/empty/default, unknown to eq/ne (a
    string default can flip to any other string)."""

    def __bool__(self) -> bool:
        return False


_FLIPPED = _Flipped()


def still_renders(gate: Gate, values: Any, *, lookup: Any) -> bool:
    """True when the gate's condition stays true with ``gate.key`` turned off (see :func:`_run`)."""
    result = _run(gate, values, lookup=lookup, flip=None)
    return result is not _UNKNOWN and bool(result)


def evaluate(gate: Gate, values: Any, *, lookup: Any, flip: tuple[str, Any] | None = None) -> bool | None:
    """The gate's condition over ``values`` (with ``flip`` = (key, value) set), or None when unknown.

    ``with`` / ``range`` / ``condition`` / ``tags`` gates are the truth of their one value.
    """
    if gate.keyword in ("condition", "tags"):
        if flip is not None and flip[0] == gate.key:
            return bool(flip[1])
        return bool(lookup(values, gate.key)[1])
    result = _run(gate, values, lookup=lookup, flip=flip if flip is not None else ("", None))
    return None if result is _UNKNOWN else bool(result)


def _run(gate: Gate, values: Any, *, lookup: Any, flip: tuple[str, Any] | None) -> Any:
    """The condition's value, _UNKNOWN, or _FLIPPED-aware for ``flip`` None (``gate.key`` turned off).

    A small evaluator of Go template pipelines over the values (paths, literals, parentheses,
    ``and``, ``or``, ``not``, ``eq``, ``ne``, ``empty``, ``default``); anything else is unknown,
    and unknown counts as deciding (the guard would rather name a key than miss one).
    """
    if gate.keyword in ("condition", "tags") or ("range" in gate.keyword and flip is None):
        return _UNKNOWN
    tokens = template_lexer.tokens(gate.expr)
    if len(tokens) > 200:
        return _UNKNOWN
    bound = dict(gate.variables)

    def value_of(tok: str) -> Any:
        if tok in ("true", "false"):
            return tok == "true"
        if tok == "nil":
            return None
        if tok.startswith(('"', "`")):
            return tok[1:-1]
        if re.fullmatch(r"-?\d+", tok):
            return int(tok)
        path = template_lexer.values_path(tok, gate.dot, bound)
        if path is None:
            return _UNKNOWN
        full = path if path.startswith("global.") or path == "global" else gate.scope + path
        if flip is None:
            if full == gate.key or full.startswith(gate.key + "."):
                return _FLIPPED
        elif flip[0] and (full == flip[0] or full.startswith(flip[0] + ".")):
            if full == flip[0]:
                return flip[1]
            return lookup(flip[1], full[len(flip[0]) + 1 :])[1]
        return lookup(values, full)[1] if full else _UNKNOWN

    def pipeline(i: int) -> tuple[Any, int]:
        result: Any = _UNKNOWN
        first = True
        while i < len(tokens) and tokens[i] != ")":
            args: list[Any] = []
            name = (
                tokens[i]
                if re.fullmatch(r"[A-Za-z_]\w*", tokens[i]) and tokens[i] not in ("true", "false", "nil")
                else ""
            )
            i += 1 if name else 0
            while i < len(tokens) and tokens[i] not in ("|", ")"):
                if tokens[i] == "(":
                    val, i = pipeline(i + 1)
                    i += 1  # the closing parenthesis
                else:
                    val, i = value_of(tokens[i]), i + 1
                args.append(val)
            if not first:
                args.append(result)
            result = call(name, args)
            first = False
            if i < len(tokens) and tokens[i] == "|":
                i += 1
        return result, i

    def call(name: str, args: list[Any]) -> Any:
        if not name:
            return args[0] if len(args) == 1 else _UNKNOWN
        if name in ("and", "or"):
            for a in args:
                if a is _UNKNOWN:
                    return _UNKNOWN
                if bool(a) == (name == "or"):
                    return a
            return args[-1] if args else _UNKNOWN
        if any(a is _UNKNOWN for a in args):
            return _UNKNOWN
        if name == "not" and len(args) == 1:
            return not args[0]
        if name == "default" and len(args) == 2 and args[1] is _FLIPPED:
            return args[0]
        if name == "empty" and len(args) == 1:
            return not args[0]
        if name in ("eq", "ne") and len(args) >= 2 and not any(a is _FLIPPED for a in args):
            same = any(args[0] == a for a in args[1:])
            return same if name == "eq" else not same
        if name == "default" and len(args) == 2:
            return args[1] if args[1] else args[0]
        return _UNKNOWN

    try:
        result, _ = pipeline(0)
    except (IndexError, RecursionError):
        return _UNKNOWN
    if "range" in gate.keyword or "with" in gate.keyword:
        return result if result is _UNKNOWN else bool(result)
    return result
