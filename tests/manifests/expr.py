"""A strict interpreter for the part of expr-lang/expr that our Argo CD Notifications triggers use.

Argo CD evaluates trigger ``when`` conditions with github.com/expr-lang/expr over the Application as
unstructured JSON (notifications-engine pkg/triggers/service.go). Go is not part of this project's
toolchain, so the tests run the conditions here, with expr's semantics where they matter:

- a missing map key reads as ``nil``; reading a field *of* ``nil`` is a run-time error, and
  notifications-engine treats an erroring condition as not triggered (a silent miss), so it raises;
- ``and``/``or`` (``&&``/``||``) short-circuit; ``not``/``!``; ``==``/``!=``; ``in`` over an array;
- ``any(array, {predicate})``/``all(...)`` with ``.field`` / ``#`` for the element; ``len(x)``.

Anything else (``?.``, ``??``, method calls, arithmetic, ...) is a syntax error here, so a trigger
cannot quietly depend on what these tests do not check.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ExprError", "evaluate"]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<op>==|!=|&&|\|\||[!.,()\[\]{}#])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*))"
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "nil"}


class ExprError(Exception):
    """A syntax error, or a run-time error (which Argo CD would log and treat as not triggered)."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExprError(f"unsupported syntax at {text[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "name" and value in _KEYWORDS:
            kind = "kw"
        out.append((kind, value))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ExprError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        node = self.or_()
        if self.peek()[0] != "eof":
            raise ExprError(f"unexpected {self.peek()[1]!r}")
        return node

    def or_(self) -> Any:
        node = self.and_()
        while self.peek()[1] in ("or", "||"):
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self) -> Any:
        node = self.not_()
        while self.peek()[1] in ("and", "&&"):
            self.take()
            node = ("and", node, self.not_())
        return node

    def not_(self) -> Any:
        if self.peek()[1] in ("not", "!"):
            self.take()
            return ("not", self.not_())
        return self.compare()

    def compare(self) -> Any:
        node = self.postfix()
        if self.peek()[1] in ("==", "!=", "in"):
            op = self.take()[1]
            node = (op, node, self.postfix())
        return node

    def postfix(self) -> Any:
        node = self.primary()
        while self.peek()[1] == ".":
            self.take()
            kind, name = self.take()
            if kind not in ("name", "kw"):
                raise ExprError(f"expected a field name, got {name!r}")
            node = ("get", node, name)
        return node

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "num":
            return ("lit", float(value) if "." in value else int(value))
        if kind == "str":
            return ("lit", bytes(value[1:-1], "utf-8").decode("unicode_escape"))
        if kind == "kw" and value in ("true", "false", "nil"):
            return ("lit", {"true": True, "false": False, "nil": None}[value])
        if value == "(":
            node = self.or_()
            self.take(")")
            return node
        if value == "[":
            items = []
            while self.peek()[1] != "]":
                items.append(self.or_())
                if self.peek()[1] == ",":
                    self.take()
            self.take("]")
            return ("list", items)
        if value == "#":
            return ("elem",)
        if value == ".":  # `.field` inside a predicate: the element's field
            _, name = self.take()
            return ("get", ("elem",), name)
        if kind == "name" and self.peek()[1] == "(":
            if value not in ("any", "all", "len"):
                raise ExprError(f"function {value} is not used by our triggers")
            self.take("(")
            args = [self.or_()]
            if self.peek()[1] == ",":
                self.take()
                self.take("{")
                args.append(("closure", self.or_()))
                self.take("}")
            self.take(")")
            return ("call", value, args)
        if kind == "name":
            return ("var", value)
        raise ExprError(f"unexpected {value!r}")


def _eval(node: Any, env: dict[str, Any], elem: Any = None) -> Any:
    op = node[0]
    if op == "lit":
        return node[1]
    if op == "var":
        if node[1] not in env:
            raise ExprError(f"unknown name {node[1]}")
        return env[node[1]]
    if op == "elem":
        return elem
    if op == "list":
        return [_eval(n, env, elem) for n in node[1]]
    if op == "get":
        base = _eval(node[1], env, elem)
        if base is None:
            raise ExprError(f"cannot fetch {node[2]} from <nil>")
        if not isinstance(base, dict):
            raise ExprError(f"cannot fetch {node[2]} from {type(base).__name__}")
        return base.get(node[2])
    if op == "and":
        return _truth(_eval(node[1], env, elem)) and _truth(_eval(node[2], env, elem))
    if op == "or":
        return _truth(_eval(node[1], env, elem)) or _truth(_eval(node[2], env, elem))
    if op == "not":
        return not _truth(_eval(node[1], env, elem))
    if op in ("==", "!="):
        equal = _eval(node[1], env, elem) == _eval(node[2], env, elem)
        return equal if op == "==" else not equal
    if op == "in":
        haystack = _eval(node[2], env, elem)
        if not isinstance(haystack, list):
            raise ExprError("`in` needs an array here")
        return _eval(node[1], env, elem) in haystack
    if op == "call":
        name, args = node[1], node[2]
        subject = _eval(args[0], env, elem)
        if name == "len":
            if not isinstance(subject, (list, dict, str)):
                raise ExprError(f"invalid argument for len (type {type(subject).__name__})")
            return len(subject)
        if not isinstance(subject, list):
            raise ExprError(f"builtin {name} needs an array, got {type(subject).__name__}")
        pred = args[1][1]
        results = (_truth(_eval(pred, env, item)) for item in subject)
        return any(results) if name == "any" else all(results)
    raise ExprError(f"unknown node {op}")


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ExprError(f"expected bool, got {type(value).__name__}")
    return value


def evaluate(condition: str, env: dict[str, Any]) -> Any:
    """The value of ``condition`` over ``env`` (``{"app": application}``); ExprError as expr would fail."""
    return _eval(_Parser(condition).parse(), env)
