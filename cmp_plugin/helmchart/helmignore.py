""".helmignore: the chart files helm leaves out, so that no guard reads a template helm never renders.

Helm's own rules (helm pkg/ignore/rules.go, applied by pkg/chart/loader/directory.go to every path
under the chart's root, slash-separated and relative to it): blank lines and ``#`` comments are
skipped; ``**`` is refused; a trailing ``/`` matches directories only; a leading ``/`` or any ``/``
matches the whole path, otherwise the base name only; matching is Go's ``filepath.Match``
(``*`` and ``?`` never cross ``/``); the first matching rule decides, and a ``!`` rule, quirk
included, ignores every path it does *not* match. ``templates/.?*`` is always added. An ignored
directory hides everything under it. Only the top chart's file applies: vendored subcharts are
loaded as part of the parent's walk.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

__all__ = ["Rules", "go_match", "load"]


class _Rule:
    """One parsed line (a plain class: a NamedTuple costs a millisecond to define on the render path)."""

    __slots__ = ("matcher", "must_dir", "negate", "pattern", "whole_path")

    def __init__(
        self, pattern: str, negate: bool, must_dir: bool, whole_path: bool, matcher: _Matcher | None
    ) -> None:
        self.pattern, self.negate, self.must_dir = pattern, negate, must_dir
        self.whole_path, self.matcher = whole_path, matcher


class Rules:
    """Parsed .helmignore rules; ``ignored(path, is_dir)`` answers like helm's ``Rules.Ignore``."""

    def __init__(self, text: str = "") -> None:
        self._rules: list[_Rule] = []
        for raw in [*text.splitlines(), "templates/.?*"]:
            rule = raw.strip()
            if not rule or rule.startswith("#") or "**" in rule:
                continue  # helm refuses a ** rule (the load fails): nothing renders then anyway
            negate = rule.startswith("!")
            rule = rule[1:] if negate else rule
            must_dir = rule.endswith("/")
            rule = rule.rstrip("/") if must_dir else rule
            whole = "/" in rule
            pattern = rule.lstrip("/")
            self._rules.append(_Rule(pattern, negate, must_dir, whole, _Matcher.of(pattern)))

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        if path in ("", ".", "./"):
            return False
        for r in self._rules:
            name = path if r.whole_path else path.rsplit("/", 1)[-1]
            if r.negate:
                if (r.must_dir and not is_dir) or not _matches(r, name):
                    return True
                continue
            if r.must_dir and not is_dir:
                continue
            if _matches(r, name):
                return True
        return False

    def keeps(self, rel: str) -> bool:
        """True when helm loads the file at ``rel`` (no ignored parent directory, file not ignored)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            if self.ignored("/".join(parts[:i]), is_dir=True):
                return False
        return not self.ignored(rel, is_dir=False)


def load(chart_dir: Path) -> Rules:
    try:
        return Rules((chart_dir / ".helmignore").read_text(errors="replace"))
    except OSError:
        return Rules()


def _matches(rule: _Rule, name: str) -> bool:
    return rule.matcher is not None and rule.matcher.match(name)


def go_match(pattern: str, name: str) -> bool:
    """Go's ``filepath.Match`` on slash paths; a malformed pattern matches nothing."""
    m = _Matcher.of(pattern)
    return m is not None and m.match(name)


class _Matcher:
    """A compiled pattern, matched as a set of positions: O(len(pattern) * len(name)), no backtracking."""

    def __init__(self, items: list[tuple[str, object]]) -> None:
        self.items = items
        self.literal = "".join(str(a) for _, a in items) if all(k == "lit" for k, _ in items) else None
        # the literal text before the first and after the last wildcard: a cheap first test
        head = tail = 0
        while head < len(items) and items[head][0] == "lit":
            head += 1
        while tail < len(items) - head and items[len(items) - 1 - tail][0] == "lit":
            tail += 1
        self.prefix = "".join(str(a) for _, a in items[:head])
        self.suffix = "".join(str(a) for _, a in items[len(items) - tail :])
        # the states reachable from each position without reading a character (through stars)
        self.reach: list[tuple[int, ...]] = []
        for s in range(len(items) + 1):
            i, got = s, [s]
            while i < len(items) and items[i][0] == "*":
                i += 1
                got.append(i)
            self.reach.append(tuple(got))

    @classmethod
    def of(cls, pattern: str) -> _Matcher | None:
        items = _compile(pattern)
        return None if items is None else cls(items)

    def match(self, name: str) -> bool:
        if self.literal is not None:
            return name == self.literal
        if not name.startswith(self.prefix) or not name.endswith(self.suffix):
            return False
        items, end = self.items, len(self.items)
        states = set(self.reach[0])
        for ch in name:
            nxt: set[int] = set()
            for s in states:
                if s == end:
                    continue
                kind, arg = items[s]
                if kind == "*":
                    if ch != "/":
                        nxt.update(self.reach[s])
                elif _step(kind, arg, ch):
                    nxt.update(self.reach[s + 1])
            if not nxt:
                return False
            states = nxt
        return end in states


def _compile(pattern: str) -> list[tuple[str, object]] | None:
    """Pattern items: ("*",), ("?",), ("lit", ch), ("class", (negated, ranges)); None when malformed."""
    items: list[tuple[str, object]] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            items.append(("*", None))
        elif ch == "?":
            items.append(("?", None))
        elif ch == "\\":
            i += 1
            if i >= n:
                return None
            items.append(("lit", pattern[i]))
        elif ch == "[":
            i += 1
            negated = i < n and pattern[i] == "^"
            i += 1 if negated else 0
            ranges: list[tuple[str, str]] = []
            while True:
                if i >= n:
                    return None
                if pattern[i] == "]" and ranges:
                    break
                lo, i = _class_char(pattern, i)
                if lo is None:
                    return None
                hi: str | None = lo
                if i < n and pattern[i] == "-":
                    hi, i = _class_char(pattern, i + 1)
                    if hi is None:
                        return None
                ranges.append((lo, hi or lo))
            items.append(("class", (negated, tuple(ranges))))
        else:
            items.append(("lit", ch))
        i += 1
    return items


def _step(kind: str, arg: object, ch: str) -> bool:
    """Whether one non-star item reads ``ch``."""
    if kind == "lit":
        return ch == arg
    return ch != "/" and (kind == "?" or _in_class(ch, arg))


def _class_char(pattern: str, i: int) -> tuple[str | None, int]:
    if i >= len(pattern) or pattern[i] in "-]":
        return None, i
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            return None, i
    return pattern[i], i + 1


def _in_class(ch: str, arg: object) -> bool:
    negated, ranges = cast("tuple[bool, tuple[tuple[str, str], ...]]", arg)
    hit = any(lo <= ch <= hi for lo, hi in ranges)
    return hit != negated
