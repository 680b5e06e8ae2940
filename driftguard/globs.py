"""Glob matching as Argo CD does it: github.com/gobwas/glob without separators (argo-cd util/glob).

``*`` (and ``**``) match any run of characters, ``?`` one character, ``[abc]``/``[a-z]`` a class,
``[!abc]`` its complement, ``{a,b*}`` alternatives (which may hold wildcards), and ``\\`` escapes
the next character. A pattern gobwas cannot compile matches nothing (Argo CD logs and moves on).
Used for sync-window applications/namespaces/clusters (app_project_types.go globMatch) and for
ignoreDifferences group/kind (util/argo/diff/ignore.go).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["match"]

_SPECIAL = frozenset("*?[]{}\\")


def match(pattern: str, value: str) -> bool:
    """Whether ``value`` matches the gobwas glob ``pattern``."""
    if pattern == "*":
        return True
    if not _SPECIAL.intersection(pattern):
        return pattern == value  # a literal: gobwas compiles it to a plain comparison
    compiled = _compile(pattern)
    return compiled is not None and compiled.fullmatch(value) is not None


@lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        regex, end = _translate(pattern, 0, in_alt=False)
    except ValueError:
        return None
    if end != len(pattern):
        return None
    return re.compile(regex, re.DOTALL)


def _translate(p: str, i: int, *, in_alt: bool) -> tuple[str, int]:
    """Regex for ``p`` from ``i`` up to the end, or (inside ``{...}``) up to a ``,`` or ``}``."""
    out: list[str] = []
    while i < len(p):
        ch = p[i]
        if in_alt and ch in ",}":
            return "".join(out), i
        if ch == "\\":
            if i + 1 >= len(p):
                raise ValueError("trailing escape")
            out.append(re.escape(p[i + 1]))
            i += 2
        elif ch == "*":
            while i < len(p) and p[i] == "*":
                i += 1
            out.append(".*")
        elif ch == "?":
            out.append(".")
            i += 1
        elif ch == "[":
            close = p.find("]", i + 1)
            if close < 0:
                raise ValueError("unclosed class")
            body = p[i + 1 : close]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            if not body:
                raise ValueError("empty class")
            parts = []
            j = 0
            while j < len(body):
                if j + 2 < len(body) and body[j + 1] == "-":
                    parts.append(f"{re.escape(body[j])}-{re.escape(body[j + 2])}")
                    j += 3
                else:
                    parts.append(re.escape(body[j]))
                    j += 1
            out.append(f"[{'^' if negate else ''}{''.join(parts)}]")
            i = close + 1
        elif ch == "{":
            alternatives = []
            i += 1
            while True:
                alt, i = _translate(p, i, in_alt=True)
                alternatives.append(alt)
                if i >= len(p):
                    raise ValueError("unclosed alternatives")
                if p[i] == "}":
                    i += 1
                    break
                i += 1  # a comma
            out.append("(?:" + "|".join(alternatives) + ")")
        else:
            out.append(re.escape(ch))
            i += 1
    if in_alt:
        raise ValueError("unclosed alternatives")
    return "".join(out), i
