"""The Go-template lexer under ``switches``: one template read once, its switches and includes.

A Go-template lexer (not a full parser) that makes one pass over each template: ``{{ ... }}``
actions are found like Go's ``text/template`` lexer finds them (quoted strings, raw strings and
``/* */`` comments may hold ``}}``; an unclosed action ends the scan, as it ends helm's parse).
Every regular expression here is anchored on a distinct first character or used as one greedy
match with nothing after it, and line numbers are counted incrementally: the work is linear in the
template's length (tests/cmp_plugin/test_gating_limits.py counts it on megabyte inputs).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

__all__ = [
    "MAX_KINDS",
    "MAX_SOURCES",
    "ROOT",
    "Segment",
    "Template",
    "actions",
    "expression_keys",
    "scan_template",
    "tokens",
    "values_path",
]


class _Lazy:
    """A pattern compiled on first use, then put in its module global's place: a render whose scan
    is cached (the usual case, see scan_chart) never compiles the lexer's patterns."""

    def __init__(self, name: str, pattern: str, flags: int = 0) -> None:
        self.name, self.pattern, self.flags = name, pattern, flags

    def __getattr__(self, attr: str) -> Any:
        compiled = re.compile(self.pattern, self.flags)
        globals()[self.name] = compiled
        return getattr(compiled, attr)


# The rest of an action after ``{{`` (and an optional trim marker): one greedy match, no backtracking
_BODY: Any = _Lazy("_BODY", r"""(?:[^"`'}]+|"(?:[^"\\\n]|\\.)*"|`[^`]*`|'(?:[^'\\\n]|\\.)*'|\}(?!\}))*""")
# What a line of plain template text says at column 0: a document separator, a kind, other content
_MARK: Any = _Lazy("_MARK", r"^(?:(---)(?=[ \t\r]|$)|kind:[ \t]*([^\s#]*))", re.M)
_CONTENT: Any = _Lazy("_CONTENT", r"^[ \t]*[^\s#]", re.M)
_TOKEN: Any = _Lazy(
    "_TOKEN",
    r'"(?:[^"\\\n]|\\.)*"'
    r"|`[^`]*`"
    r"|'(?:[^'\\\n]|\\.)*'"
    r"|\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
    r"|(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
    r"|[A-Za-z_][A-Za-z0-9_]*"
    r"|:=|\S",
)
_WS: Any = _Lazy("_WS", r"\s+")
_WORD: Any = _Lazy("_WORD", r"[a-z]+")
_VARIABLE: Any = _Lazy("_VARIABLE", r"\$[A-Za-z0-9_]+")
_INCLUDE: Any = _Lazy("_INCLUDE", r"\b(?:include|template)\s+\"((?:[^\"\\\n]|\\.)*)\"")
_REINDENT: Any = _Lazy("_REINDENT", r"\b(?:n?indent)\s+([1-9]|\()")
_ASSIGNS: Any = _Lazy("_ASSIGNS", r"\$[A-Za-z0-9_]*\s*:?=")
_OPENERS = frozenset(("if", "with", "range", "define", "block"))
_ROOT_FIELDS = frozenset(("Values", "Release", "Chart", "Capabilities", "Template", "Files", "Subcharts"))
ROOT = "<root>"
"""``Gate.dot`` when ``.`` is the template's root context (``.Values`` reads values)."""
MAX_KINDS = 5
MAX_SOURCES = 8


class Segment:
    """One branch of an open block (or a define's body) while a template is read."""

    __slots__ = (
        "at_doc_start", "expr", "fresh", "has_doc", "includes", "keyword", "kinds", "line", "owner",
        "variables",
    )  # fmt: skip

    def __init__(
        self,
        keyword: str,
        expr: str,
        line: int,
        *,
        at_doc_start: bool,
        variables: dict[str, str],
        owner: str | None,
    ) -> None:
        self.keyword, self.expr, self.line, self.at_doc_start = keyword, expr, line, at_doc_start
        self.variables, self.owner = variables, owner
        self.fresh = False  # a `---` inside: a document starts within the segment
        self.has_doc = False
        self.kinds: list[str] = []
        self.includes: list[str] = []  # names included (at most MAX_SOURCES, but all for a define)


class _Block:
    __slots__ = ("dot", "keyword", "outer_dot", "saved_vars", "segments")

    def __init__(self, keyword: str, dot: str | None, outer_dot: str | None) -> None:
        self.keyword, self.dot, self.outer_dot = keyword, dot, outer_dot
        self.segments: list[Segment] = []
        self.saved_vars: dict[str, str | None] = {}


class Template(NamedTuple):
    """What one pass over a template found."""

    gates: list[tuple[Segment, str | None]]
    """Condition segments (not plain else) that hold documents or includes, with their expression's dot."""
    defines: dict[str, Segment]
    """Named templates: a pseudo-segment per define with its documents and includes."""
    include_sites: list[str]
    """Names included at the top level of the template (outside any define)."""
    content_only: int
    complete: bool
    """False when an unclosed action ended the scan."""
    work: int
    """Regex matches and actions handled: the scan's work, for the linearity tests."""


def actions(text: str) -> Iterator[tuple[int, int, str | None]]:
    """(start, end, body) of each action; body None for a comment. Stops at an unclosed action."""
    pos, n = 0, len(text)
    while True:
        i = text.find("{{", pos)
        if i < 0:
            return
        j = i + 2
        if text.startswith("-", j) and j + 1 < n and text[j + 1] in " \t\r\n":
            j += 1
        while j < n and text[j] in " \t\r\n":
            j += 1
        if text.startswith("/*", j):
            k = text.find("*/", j + 2)
            if k < 0:
                return
            e = k + 2
            if text.startswith(" -}}", e):
                e += 2
            if not text.startswith("}}", e):
                return
            yield i, e + 2, None
            pos = e + 2
            continue
        m = _BODY.match(text, j)
        e = m.end() if m else j
        if not text.startswith("}}", e):
            return
        body = text[j:e].rstrip()
        if body.endswith("-") and (len(body) == 1 or body[-2] in " \t\r\n"):
            body = body[:-1].rstrip()
        yield i, e + 2, body
        pos = e + 2


class _Reader:
    """The state of one pass over one template."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.gates: list[tuple[Segment, str | None]] = []
        self.defines: dict[str, Segment] = {}
        self.top_includes: list[str] = []
        self.stack: list[_Block] = []
        self.variables: dict[str, str] = {}
        self.define: Segment | None = None
        self.define_name: str | None = None
        self.doc_open = False
        self.content_only = 0
        self.work = 0
        self._line, self._line_pos = 1, 0

    def line_at(self, pos: int) -> int:
        self._line += self.text.count("\n", self._line_pos, pos)
        self._line_pos = pos
        return self._line

    def top(self) -> Segment | None:
        return self.stack[-1].segments[-1] if self.stack else self.define

    def dot(self) -> str | None:
        return self.stack[-1].dot if self.stack else (None if self.define is not None else ROOT)

    def segment(self, keyword: str, expr: str, pos: int, *, at_doc_start: bool) -> Segment:
        return Segment(
            keyword,
            expr,
            self.line_at(pos),
            at_doc_start=at_doc_start,
            variables={v: self.variables[v] for v in _VARIABLE.findall(expr) if v in self.variables},
            owner=self.define_name,
        )

    def plain(self, start: int, end: int) -> None:
        seg = self.top()
        after_sep = -1
        for m in _MARK.finditer(self.text, start, end):
            self.work += 1
            if m.group(1):
                after_sep = m.end()
                if seg is not None:
                    seg.fresh = True
            elif seg is not None and (seg.at_doc_start or seg.fresh):
                kind = m.group(2) if m.group(2) and not m.group(2).startswith("{{") else "?"
                seg.has_doc = True
                if len(seg.kinds) < MAX_KINDS:
                    seg.kinds.append(kind)
        if after_sep >= 0:
            self.doc_open = _CONTENT.search(self.text, after_sep, end) is not None
        elif not self.doc_open:
            self.doc_open = _CONTENT.search(self.text, start, end) is not None

    def output(self, start: int, body: str) -> None:
        """An action that prints at column 0 where a document may start (``{{ $crd | toYaml }}``,
        ``{{ .Files.Get "crds.yaml" }}``) may print whole documents of a kind the text does not show."""
        seg = self.top()
        if seg is None or self.doc_open or (start > 0 and self.text[start - 1] != "\n"):
            return
        if _INCLUDE.search(body) is not None:
            return  # an include is followed to its define instead
        seg.has_doc = True
        if len(seg.kinds) < MAX_KINDS and "?" not in seg.kinds:
            seg.kinds.append("?")
        self.doc_open = True

    def include(self, name: str) -> None:
        seg = self.top()
        if seg is None:
            self.top_includes.append(name)
        elif len(seg.includes) < MAX_SOURCES or seg is self.define:
            seg.includes.append(name)

    def close(self, block: _Block) -> None:
        parent = self.top()
        for seg in block.segments:
            if parent is not None:
                if seg.has_doc:
                    parent.has_doc = True
                    parent.kinds.extend(seg.kinds[: max(0, MAX_KINDS - len(parent.kinds))])
                room = len(seg.includes) if parent is self.define else MAX_SOURCES - len(parent.includes)
                parent.includes.extend(seg.includes[: max(0, room)])
            else:
                self.top_includes.extend(seg.includes)
            if seg.keyword == "else":
                continue
            if seg.has_doc or (seg.includes and seg.at_doc_start):
                self.gates.append((seg, block.outer_dot))  # Go reads every branch's pipeline outside it
            else:
                self.content_only += 1

    def action(self, start: int, body: str) -> None:
        m = _WORD.match(body)
        word = m.group(0) if m else ""
        dot = self.dot()
        if word in ("define", "block"):
            expr = _fold(body[len(word) :])
            name = _first_string(expr)
            if word == "block" and name is not None:
                self.include(name)
            if self.stack or self.define is not None:
                block = _Block(word, None, dot)  # a block inside a define: its own scope
                block.segments.append(self.segment(word, expr, start, at_doc_start=True))
                self.stack.append(block)
                return
            self.define_name = name
            self.define = self.segment(word, expr, start, at_doc_start=True)
            if name is not None:
                self.defines[name] = self.define
            self.doc_open = False
        elif word in ("if", "with", "range"):
            expr = _fold(body[len(word) :])
            new_dot = (
                _values_path(_bare(expr), dot, self.variables)
                if word == "with"
                else (None if word == "range" else dot)
            )
            block = _Block(word, new_dot, dot)
            block.segments.append(self.segment(word, expr, start, at_doc_start=not self.doc_open))
            self.stack.append(block)
            _bind(body, dot, self.variables, block)
        elif word == "else" and self.stack:
            block = self.stack[-1]
            rest = _fold(body[4:])
            kw, _, expr = rest.partition(" ")
            first = block.segments[0]
            if kw in ("if", "with"):
                if kw == "with":
                    block.dot = _values_path(_bare(expr), block.outer_dot, self.variables)
                seg = self.segment(f"else {kw}", expr, start, at_doc_start=first.at_doc_start)
            else:
                seg = self.segment("else", "", start, at_doc_start=first.at_doc_start)
                if block.keyword == "with":
                    block.dot = block.outer_dot
            block.segments.append(seg)
            self.doc_open = not first.at_doc_start
        elif word == "end":
            if self.stack:
                block = self.stack.pop()
                for name, old in block.saved_vars.items():
                    if old is None:
                        self.variables.pop(name, None)
                    else:
                        self.variables[name] = old
                if block.keyword not in ("define", "block"):
                    self.close(block)
                elif self.top() is not None:
                    self.top().includes.extend(block.segments[0].includes)  # type: ignore[union-attr]
            elif self.define is not None:
                self.define, self.define_name = None, None
                self.doc_open = False
        else:
            if word not in ("else", "break", "continue", "fail") and not _ASSIGNS.match(body):
                self.output(start, body)
            if "include" in body or "template" in body:
                indented = _REINDENT.search(body) is not None
                for m in _INCLUDE.finditer(body):
                    self.work += 1
                    if not indented:
                        self.include(m.group(1))
            if "=" in body:
                _bind(body, dot, self.variables, self.stack[-1] if self.stack else None)


def scan_template(text: str) -> Template:
    """One pass over a template: its gates, named templates and includes."""
    reader = _Reader(text)
    prev = 0
    for start, end, body in actions(text):
        reader.work += 1
        reader.plain(prev, start)
        prev = end
        if body is not None:
            reader.action(start, body)
    complete = text.find("{{", prev) < 0
    if complete:
        reader.plain(prev, len(text))
    return Template(
        reader.gates, reader.defines, reader.top_includes, reader.content_only, complete, reader.work
    )


def _bare(expr: str) -> str:
    """A with/range expression that is one token (``.Values.a``, ``$v.b``), else an empty string."""
    expr = expr.strip()
    return expr if expr and not any(c in expr for c in " (|") else ""


def _first_string(expr: str) -> str | None:
    m = re.match(r'\s*"((?:[^"\\\n]|\\.)*)"', expr)
    return m.group(1) if m else None


def _fold(text: str) -> str:
    return str(_WS.sub(" ", text)).strip()


def _bind(body: str, dot: str | None, variables: dict[str, str], block: _Block | None) -> None:
    """``$v := .Values.a`` (or ``=``): remember that ``$v`` is the values path ``a``."""
    m = re.match(r"(?:(?:if|with|range)\s+)?(\$[A-Za-z0-9_]+)\s*:?=\s*(\S+)\s*$", body)
    if m is None:
        return
    name, target = m.group(1), m.group(2)
    path = _values_path(target, dot, variables)
    if block is not None and name not in block.saved_vars:
        block.saved_vars[name] = variables.get(name)
    if path is None:
        variables.pop(name, None)
    else:
        variables[name] = path


def _values_path(token: str, dot: str | None, variables: dict[str, str]) -> str | None:
    """The values path a single token stands for ("" is the whole of .Values), or None."""
    if token.startswith("$"):
        head, _, rest = token.partition(".")
        if head == "$":
            if rest == "Values" or rest.startswith("Values."):
                return rest[7:]
            return None
        base = variables.get(head)
        if base is None:
            return None
        return _join(base, rest)
    if token == ".":  # noqa: S105 - a template token, not a secret
        return dot if dot not in (None, ROOT) else None
    if token.startswith("."):
        rest = token[1:]
        first = rest.split(".", 1)[0]
        if first == "Values":  # the chart's values wherever it is written (inside with: a render error)
            return rest[7:]
        if dot is None or dot == ROOT:
            return None
        if first in _ROOT_FIELDS:
            return None
        return _join(dot, rest)
    return None


def tokens(expr: str) -> list[str]:
    """The tokens of a template expression (strings, variables, field chains, words, punctuation)."""
    return [m.group(0) for m in _TOKEN.finditer(expr)]


def values_path(token: str, dot: str | None, variables: dict[str, str]) -> str | None:
    """The values path one token stands for ("" is the whole of .Values), or None."""
    return _values_path(token, dot, variables)


def _join(base: str, rest: str) -> str:
    return f"{base}.{rest}" if base and rest else base or rest


def expression_keys(
    expr: str, *, dot: str | None = ROOT, variables: Iterable[tuple[str, str]] = (), scope: str = ""
) -> list[str]:
    """The values keys an expression reads, longest paths only, under ``scope``; Gate.expr reads back."""
    bound = dict(variables)
    tokens = [(m.group(0), m.start()) for m in _TOKEN.finditer(expr)]
    keys: list[str] = []
    i = 0
    while i < len(tokens):
        tok, pos = tokens[i]
        if tok == "dig":  # dig "k1" "k2" DEFAULT MAP: the keys are every argument but the last two
            j, args, depth = i + 1, [], 0
            while j < len(tokens) and (depth or tokens[j][0] not in ("|", ")")):
                t = tokens[j][0]
                if depth == 0:
                    args.append(t)
                depth += (t == "(") - (t == ")")
                j += 1
            path = _values_path(args[-1], dot, bound) if args else None
            if path is not None and all(a.startswith('"') for a in args[:-2]):
                keys.append(_join(path, ".".join(a[1:-1] for a in args[:-2])))
            i = j
            continue
        if tok.startswith((".", "$")) and not (pos > 0 and expr[pos - 1] == ")"):
            path = _values_path(tok, dot, bound)
            if path is not None:
                before = tokens[i - 1][0] if i > 0 else ""
                j = i + 1
                if before in ("index", "hasKey"):
                    parts = [path] if path else []
                    while j < len(tokens) and tokens[j][0].startswith('"'):
                        parts.append(tokens[j][0][1:-1])
                        j += 1
                        if before == "hasKey":
                            break
                    path = ".".join(parts)
                if path:
                    keys.append(path)
                i = j
                continue
        i += 1
    out = dict.fromkeys(k if k.startswith("global.") or k == "global" else scope + k for k in keys if k)
    # drop a key that is a dotted prefix of another one read here: the keys starting with "k." sit
    # together in sorted order, one bisection finds them (no slicing of every prefix: long keys)
    ordered = sorted(out)
    kept = []
    for k in out:
        at = bisect_left(ordered, k + ".")
        if not (at < len(ordered) and ordered[at].startswith(k + ".")):
            kept.append(k)
    return kept
